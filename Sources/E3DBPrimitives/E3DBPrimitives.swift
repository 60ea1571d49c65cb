// E3DBPrimitives: libsodium primitives (in progress).

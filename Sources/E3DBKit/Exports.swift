// E3DBKit: umbrella module. `import E3DBKit` brings in every layer below the CLI.
@_exported public import E3DBAPI
@_exported public import E3DBCanonicalJSON
@_exported public import E3DBDocuments
@_exported public import E3DBFiles
@_exported public import E3DBIdentity
@_exported public import E3DBKeys
@_exported public import E3DBPrimitives

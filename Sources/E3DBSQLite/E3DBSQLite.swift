public import E3DBPageCodec

/// Transparent whole-database encryption for SQLite apps on the system SQLite (work in progress).
public enum E3DBSQLite {
    /// The name the VFS is registered under.
    public static let vfsName = "e3dbkit-sqlcipher"
}

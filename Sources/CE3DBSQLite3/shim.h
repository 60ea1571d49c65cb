#ifndef CE3DBSQLITE3_SHIM_H
#define CE3DBSQLITE3_SHIM_H
#include <sqlite3.h>

/// The sqlite3_file that E3DBSQLite's VFS hands to SQLite: SQLite allocates szOsFile bytes, this struct first and
/// the underlying VFS's file right after it (`inner`, NULL for files kept in memory). `state` is the Swift object
/// (an unmanaged reference) that holds the file's cipher state.
typedef struct E3DBSQLiteFile {
    sqlite3_file base;
    sqlite3_file *inner;
    void *state;
} E3DBSQLiteFile;

/// The byte offset of `inner`'s storage inside an E3DBSQLiteFile allocation (pointer aligned).
static inline int e3db_sqlite_file_header_size(void) {
    return (int)((sizeof(E3DBSQLiteFile) + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *));
}

/// sqlite3_log without the format string (variadic functions cannot be called from Swift).
static inline void e3db_sqlite_log(int code, const char *message) {
    sqlite3_log(code, "%s", message);
}

/// sqlite3_db_config for an on/off option (a variadic function, which Swift cannot call): sets `option` to `on`.
static inline int e3db_sqlite_db_config_flag(sqlite3 *db, int option, int on) {
    return sqlite3_db_config(db, option, on, (int *)0);
}

#endif

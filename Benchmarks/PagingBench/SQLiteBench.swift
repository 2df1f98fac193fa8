// Row 6: the sqlite-store plugin (LoadedInterceptor handle / intercept) against a plain loop of
// the same SQL statements through the C API, with the same file settings.
import CSQLite
import Foundation
import Paging
import PagingHost

/// The plugin's statements and schema (Plugins/SQLite/sqlite_store.c), run directly.
final class PlainStore {
    let db: OpaquePointer
    var beginRead: OpaquePointer!, beginWrite: OpaquePointer!, commit: OpaquePointer!
    var getPage: OpaquePointer!, getItems: OpaquePointer!
    var putPage: OpaquePointer!, delItems: OpaquePointer!, putItem: OpaquePointer!
    /// Bound with SQLITE_STATIC, as the plugin does: it must outlive the statements.
    let namespace = strdup("default")!
    var buffer = [UInt8](repeating: 0, count: 4_096)

    init(path: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
              let handle else { throw BenchError("sqlite3_open_v2 \(path) failed") }
        db = handle
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5_000)
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=NORMAL")
        try exec("BEGIN IMMEDIATE")
        try exec("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;")
        try exec("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', 3)")
        try exec("""
            CREATE TABLE IF NOT EXISTS pages ( id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, identity BLOB NOT NULL,\
             prev_key BLOB, next_key BLOB, flags INTEGER NOT NULL, item_count INTEGER NOT NULL,\
             stored_at INTEGER NOT NULL, UNIQUE (namespace, identity));\
            CREATE TABLE IF NOT EXISTS items ( page INTEGER NOT NULL,\
             position INTEGER NOT NULL, item BLOB NOT NULL, PRIMARY KEY (page, position)) WITHOUT ROWID;
            """)
        try exec("COMMIT")
        beginRead = try prepare("BEGIN")
        beginWrite = try prepare("BEGIN IMMEDIATE")
        commit = try prepare("COMMIT")
        getPage = try prepare("SELECT prev_key, next_key, flags, item_count, stored_at, id FROM pages WHERE namespace = ?1 AND identity = ?2")
        getItems = try prepare("SELECT item FROM items WHERE page = ?1 ORDER BY position")
        putPage = try prepare("INSERT OR REPLACE INTO pages (namespace, identity, prev_key, next_key, flags, item_count, stored_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        delItems = try prepare("DELETE FROM items WHERE page = (SELECT id FROM pages WHERE namespace = ?1 AND identity = ?2)")
        putItem = try prepare("INSERT INTO items (page, position, item) VALUES (?1, ?2, ?3)")
    }

    deinit {
        for statement in [beginRead, beginWrite, commit, getPage, getItems, putPage, delItems, putItem] { sqlite3_finalize(statement) }
        sqlite3_close(db)
        free(namespace)
    }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw BenchError("\(sql): \(String(cString: sqlite3_errmsg(db)))") }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchError("\(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }

    @inline(__always) private func step(_ statement: OpaquePointer) -> Int32 {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        return rc
    }

    /// Binds the namespace and the page's identity (as the plugin is handed it: page size and key).
    private func bindID(_ statement: OpaquePointer, _ key: UnsafeRawBufferPointer, _ pageSize: Int) {
        sqlite3_bind_text(statement, 1, namespace, -1, nil)
        var identity = Array("\(pageSize) \(key.count):".utf8)
        identity.append(contentsOf: key)
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self) // SQLITE_TRANSIENT: SQLite copies the bytes
        identity.withUnsafeBytes { sqlite3_bind_blob(statement, 2, $0.baseAddress, Int32($0.count), transient) }
    }

    /// One page written as the plugin's handle() does: one BEGIN IMMEDIATE ... COMMIT.
    func write(key: [UInt8], prev: [UInt8]?, next: [UInt8]?, items: [[UInt8]], pageSize: Int) -> Bool {
        guard step(beginWrite) == SQLITE_DONE else { return false }
        return key.withUnsafeBytes { key -> Bool in
            bindID(delItems, key, pageSize)
            guard step(delItems) == SQLITE_DONE else { return false }
            sqlite3_clear_bindings(delItems)
            bindID(putPage, key, pageSize)
            let rc: Int32 = withOptional(prev) { prev in
                withOptional(next) { next in
                    if let prev { sqlite3_bind_blob(putPage, 3, prev.baseAddress, Int32(prev.count), nil) } else { sqlite3_bind_null(putPage, 3) }
                    if let next { sqlite3_bind_blob(putPage, 4, next.baseAddress, Int32(next.count), nil) } else { sqlite3_bind_null(putPage, 4) }
                    sqlite3_bind_int64(putPage, 5, 0)
                    sqlite3_bind_int64(putPage, 6, Int64(items.count))
                    var ts = timespec()
                    clock_gettime(CLOCK_REALTIME, &ts)
                    sqlite3_bind_int64(putPage, 7, Int64(ts.tv_sec) * 1_000 + Int64(ts.tv_nsec / 1_000_000))
                    return step(putPage)
                }
            }
            sqlite3_clear_bindings(putPage)
            guard rc == SQLITE_DONE else { return false }
            sqlite3_bind_int64(putItem, 1, sqlite3_last_insert_rowid(db))
            for (position, item) in items.enumerated() {
                sqlite3_bind_int64(putItem, 2, Int64(position))
                let rc = item.withUnsafeBytes { sqlite3_bind_blob(putItem, 3, $0.baseAddress, Int32($0.count), nil); return step(putItem) }
                guard rc == SQLITE_DONE else { return false }
            }
            sqlite3_clear_bindings(putItem)
            return step(commit) == SQLITE_DONE
        }
    }

    /// One page read as the plugin's intercept() does: one read transaction, both SELECTs, the
    /// keys and items copied into a buffer. Returns the item count (-1 on an error).
    func read(key: [UInt8], pageSize: Int) -> Int {
        guard step(beginRead) == SQLITE_DONE else { return -1 }
        var count = 0, used = 0
        key.withUnsafeBytes { key in
            bindID(getPage, key, pageSize)
            var page: Int64 = 0
            if sqlite3_step(getPage) == SQLITE_ROW {
                for column in Int32(0)...1 { used += copyColumn(getPage, column, at: used) }
                _ = sqlite3_column_int64(getPage, 2)
                _ = sqlite3_column_int64(getPage, 3)
                _ = sqlite3_column_int64(getPage, 4)
                page = sqlite3_column_int64(getPage, 5)
            }
            sqlite3_reset(getPage)
            sqlite3_clear_bindings(getPage)
            sqlite3_bind_int64(getItems, 1, page)
            while sqlite3_step(getItems) == SQLITE_ROW {
                used += copyColumn(getItems, 0, at: used)
                count += 1
            }
            sqlite3_reset(getItems)
            sqlite3_clear_bindings(getItems)
        }
        return step(commit) == SQLITE_DONE ? count : -1
    }

    private func copyColumn(_ statement: OpaquePointer, _ column: Int32, at offset: Int) -> Int {
        let length = Int(sqlite3_column_bytes(statement, column))
        guard let data = sqlite3_column_blob(statement, column), length > 0 else { return 0 }
        if buffer.count < offset + length { buffer += [UInt8](repeating: 0, count: offset + length) }
        buffer.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: offset).copyMemory(from: data, byteCount: length) }
        return length
    }
}

private func withOptional<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}

func benchSQLiteStore(_ report: Report) async throws {
    progress("row 6: sqlite-store vs plain C-API loop")
    guard let path = shippedPlugin("sqlite-store") else {
        report.add("6", "SQLite store", "—", target: "≥ 0.5× plain loop", .notMeasured, "libsqlite-store.so missing: run `swift build -c release` first")
        return
    }
    let library = try PluginLibrary.open(path: path)
    let pageCount = 2_000
    let params = PagingRequestParams(pageSize: itemsPerPage)
    let pages: [PluginPage] = (0..<pageCount).map { n in
        let request = PluginRequest(kind: .append, keyChain: PagingKeyChain(
            key: PluginKey("\(n)"), prevKey: n > 0 ? PluginKey("\(n - 1)") : nil, nextKey: PluginKey("\(n + 1)")), params: params)
        return Page(request: request, values: (0..<itemsPerPage).map { PluginItem(json: "\(n * itemsPerPage + $0)") })
    }
    let folder = "\(scratch)/sqlite"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)

    var pluginWrite: [Double] = [], pluginRead: [Double] = [], plainWrite: [Double] = [], plainRead: [Double] = []
    var pluginConcurrentRead: [Double] = []
    for round in 0..<6 { // round 0 warms up and is dropped
        // The plugin, through LoadedInterceptor: handle() writes, intercept() reads (COMPLETE).
        let store = try library.makeInterceptor(config: try JSONValue.parse(#"{"path": "\#(folder)/plugin-\#(round).db"}"#), sink: silentSink)
        var start = nowNs()
        for page in pages { await store.handle(page: page) }
        let pw = Double(nowNs() - start)
        var hits = 0
        start = nowNs()
        for page in pages {
            if case .complete(let stored) = try await store.intercept(request: page.request) { hits += stored.values.count }
        }
        let pr = Double(nowNs() - start)
        // The same reads all at once: the plugin's reader thread runs them one after another
        // while the loads wait without a thread.
        start = nowNs()
        let concurrentHits = try await withThrowingTaskGroup(of: Int.self) { group in
            for page in pages {
                group.addTask {
                    guard case .complete(let stored) = try await store.intercept(request: page.request) else { return 0 }
                    return stored.values.count
                }
            }
            return try await group.reduce(0, +)
        }
        let pc = Double(nowNs() - start)
        store.destroy()
        guard hits == pageCount * itemsPerPage, concurrentHits == hits else {
            throw BenchError("sqlite-store served \(hits) then \(concurrentHits) items, expected \(pageCount * itemsPerPage)")
        }

        // The plain loop: the same statements, schema and settings, one transaction a page.
        let plain = try PlainStore(path: "\(folder)/plain-\(round).db")
        let raw = pages.map { page in
            (page.request.key.bytes, page.prevKey?.bytes, page.nextKey?.bytes, page.values.map(\.bytes))
        }
        start = nowNs()
        for (key, prev, next, items) in raw where !plain.write(key: key, prev: prev, next: next, items: items, pageSize: itemsPerPage) {
            throw BenchError("plain write failed")
        }
        let qw = Double(nowNs() - start)
        var read = 0
        start = nowNs()
        for (key, _, _, _) in raw { read += plain.read(key: key, pageSize: itemsPerPage) }
        let qr = Double(nowNs() - start)
        guard read == pageCount * itemsPerPage else { throw BenchError("plain read \(read) items") }
        if round > 0 {
            pluginWrite.append(Double(pageCount) * 1e9 / pw)
            pluginRead.append(Double(pageCount) * 1e9 / pr)
            pluginConcurrentRead.append(Double(pageCount) * 1e9 / pc)
            plainWrite.append(Double(pageCount) * 1e9 / qw)
            plainRead.append(Double(pageCount) * 1e9 / qr)
        }
    }
    let pw = median(pluginWrite), pr = median(pluginRead), qw = median(plainWrite), qr = median(plainRead)
    let wr = pw / qw, rr = pr / qr, pc = median(pluginConcurrentRead)
    report.add("6", "SQLite store plugin (LoadedInterceptor.handle / .intercept), 2,000 pages of 20 items, WAL + synchronous=NORMAL, 1 transaction a page",
               "write \(formatRate(pw)) pages; read \(formatRate(pr)) pages",
               target: "≥ 0.5× plain loop", verdict(wr >= 0.5 && rr >= 0.5),
               "plain C-API loop: write \(formatRate(qw)), read \(formatRate(qr)) → write \(fmt(wr, 2))×, read \(fmt(rr, 2))×; "
               + "the plugin's reads all 2,000 at once: \(formatRate(pc)) pages (\(fmt(pc / qr, 2))×); each read runs on the plugin's reader thread (paging.async-intercept/1): one after another, two thread switches a read")
    if wr < 0.5 || rr < 0.5 {
        report.miss("6 (sqlite-store): write \(fmt(wr, 2))×, read \(fmt(rr, 2))× the plain loop: each read goes to the plugin's reader thread and its answer back to a task thread, two thread switches a read, which the plain loop does not pay")
    }
}

import CPaging
import FoundationEssentials
import Glibc
import Paging

/// The messages between a host and an isolated plugin's child process (`pager __isolate`),
/// over a stream socket: each frame is a 4-byte little-endian length, then an operation byte,
/// a call id (8 bytes) and the operation's payload. Calls carry ids so that many are in flight
/// at once and are answered in any order.
enum IsolationOp: UInt8 {
    // Host to child.
    case start = 0, fetch, intercept, transform, handle, loadFailed, keyChain, cancel, refreshKeyAt, health, published
    // Child to host.
    case reply = 100, failure, log, invalidated
}

/// The largest frame either side accepts (a page is bounded by `max_page_bytes` besides).
let isolationMaxFrame = 1 << 30

/// The largest frame a host takes from the child of a plugin with `limits`: a page of
/// `max_page_bytes`, its items' lengths, its keys, and room for the rest (metadata, a request's
/// parameters, a message): a hostile child makes the host buffer no more than that before
/// its frame is refused.
func isolationFrameLimit(_ limits: PluginLimits) -> Int {
    min(isolationMaxFrame, limits.maxPageBytes + 4 * limits.maxItemsPerPage + 4 * maxKeyBytes + (16 << 20))
}

/// Builds one frame.
struct WireWriter {
    private(set) var bytes: [UInt8] = [0, 0, 0, 0]

    init(_ op: IsolationOp, call: UInt64) {
        bytes.reserveCapacity(128)
        bytes.append(op.rawValue)
        u64(call)
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func data(_ value: [UInt8]) {
        u32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) { data(Array(value.utf8)) }

    mutating func optionalKey(_ key: PluginKey?) {
        bool(key != nil)
        if let key { data(key.bytes) }
    }

    mutating func request(_ request: PluginRequest) {
        u8(request.kind == .refresh ? 0 : request.kind == .prepend ? 1 : 2)
        data(request.key.bytes)
        optionalKey(request.keyChain.prevKey)
        optionalKey(request.keyChain.nextKey)
        u32(UInt32(clamping: request.params.pageSize))
        u32(UInt32(request.params.userInfo.count))
        for (key, value) in request.params.userInfo {
            string(key)
            string(value)
        }
    }

    mutating func page(_ page: PluginPage) {
        request(page.request)
        u32(UInt32(page.values.count))
        for value in page.values { data(value.bytes) }
        optionalKey(page.prevKey)
        optionalKey(page.nextKey)
        u32(page.markFlags)
        u32(UInt32(page.metadata.count))
        for (key, value) in page.metadata {
            string(key)
            string(value)
        }
    }

    /// The frame, its length filled in.
    mutating func finish() -> [UInt8] {
        let length = UInt32(bytes.count - 4).littleEndian
        withUnsafeBytes(of: length) { raw in
            for index in 0..<4 { bytes[index] = raw[index] }
        }
        return bytes
    }
}

/// A frame that ended before its fields did, or holds a value out of range.
struct WireError: Error, CustomStringConvertible {
    let description: String
}

/// Reads one frame's fields, in the order ``WireWriter`` wrote them.
struct WireReader {
    private let bytes: [UInt8]
    private var index: Int
    private(set) var op: UInt8 = 0
    private(set) var call: UInt64 = 0

    /// `body` is a frame without its length.
    init(_ body: [UInt8]) throws(WireError) {
        bytes = body
        index = 0
        op = try u8()
        call = try u64()
    }

    private mutating func take(_ count: Int) throws(WireError) -> ArraySlice<UInt8> {
        guard count >= 0, bytes.count - index >= count else { throw WireError(description: "a truncated frame") }
        defer { index += count }
        return bytes[index..<index + count]
    }

    mutating func u8() throws(WireError) -> UInt8 { try take(1).first! }
    mutating func bool() throws(WireError) -> Bool { try u8() != 0 }

    mutating func u32() throws(WireError) -> UInt32 {
        try take(4).reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64() throws(WireError) -> UInt64 {
        try take(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func data() throws(WireError) -> [UInt8] { Array(try take(Int(try u32()))) }
    mutating func string() throws(WireError) -> String { String(decoding: try data(), as: UTF8.self) }

    /// A string that must be UTF-8, as the host takes it from a plugin (a request's params, a
    /// page's metadata): decoding it lossily would pass on what the plugin did not send.
    mutating func utf8(_ what: String) throws(WireError) -> String {
        guard let text = String(validating: try data(), as: UTF8.self) else { throw WireError(description: "\(what) that is not UTF-8") }
        return text
    }

    mutating func optionalKey() throws(WireError) -> PluginKey? {
        try bool() ? PluginKey(bytes: try data()) : nil
    }

    /// A request; its retry policy (which stays with the host) is `base`'s.
    mutating func request(base: PagingRequestParams) throws(WireError) -> PluginRequest {
        let kinds: [PagingRequestKind] = [.refresh, .prepend, .append]
        let kind = Int(try u8())
        guard kind < kinds.count else { throw WireError(description: "request kind \(kind) is unknown") }
        let key = PluginKey(bytes: try data())
        let chain = PagingKeyChain(key: key, prevKey: try optionalKey(), nextKey: try optionalKey())
        var params = base
        params.pageSize = Int(try u32())
        let count = Int(try u32())
        var userInfo: [String: String] = [:]
        for _ in 0..<min(count, bytes.count) { userInfo[try utf8("params")] = try utf8("params") }
        params.userInfo = userInfo
        return PluginRequest(kind: kinds[kind], keyChain: chain, params: params)
    }

    mutating func page(base: PagingRequestParams) throws(WireError) -> PluginPage {
        let request = try request(base: base)
        let count = Int(try u32())
        guard count <= bytes.count - index else { throw WireError(description: "a truncated frame") }
        var values: [PluginItem] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(PluginItem(bytes: try data())) }
        var page = PluginPage(request: request, values: values, prevKey: try optionalKey(), nextKey: try optionalKey())
        page.takeMarks(try u32())
        let metadata = Int(try u32())
        for _ in 0..<min(metadata, bytes.count) { page.metadata[try utf8("page metadata")] = try utf8("page metadata") }
        return page
    }
}

/// Frames over one stream socket: whole frames out (with `MSG_NOSIGNAL`, so that a closed
/// peer is an error rather than a SIGPIPE), whole frames in.
struct WireSocket: Sendable {
    let fd: Int32
    /// The longest frame ``next()`` takes.
    var maxFrame = isolationMaxFrame

    /// Sends a frame; false when the peer is gone.
    func send(_ frame: [UInt8]) -> Bool {
        frame.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += sent
            }
            return true
        }
    }

    /// What came on the socket.
    enum Incoming {
        /// A frame's body (without its length).
        case frame([UInt8])
        /// The end of the stream, or an error.
        case ended
        /// A length no frame has: why.
        case malformed(String)
    }

    /// The next frame's body (without its length); `nil` at the end of the stream, on an error
    /// or on a malformed length.
    func receive() -> [UInt8]? {
        if case .frame(let body) = next() { return body }
        return nil
    }

    /// The next frame, the end of the stream, or a length no frame has.
    func next() -> Incoming {
        var header = [UInt8](repeating: 0, count: 4)
        guard read(into: &header) else { return .ended }
        let length = header.reversed().reduce(0) { $0 << 8 | Int($1) }
        guard length >= 9, length <= maxFrame else {
            let bound = maxFrame < isolationMaxFrame ? " (a page of max_page_bytes, its keys and the rest)" : ""
            return .malformed("a frame of \(length) bytes, where frames have 9 to \(maxFrame)\(bound)")
        }
        // Grown as the bytes come (64 KiB at a time): a child that announces a gigabyte and
        // sends nothing made the host allocate the gigabyte.
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(length, 1 << 16))
        while body.count < length {
            let count = min(chunk.count, length - body.count)
            if count < chunk.count { chunk = [UInt8](repeating: 0, count: count) }
            guard read(into: &chunk) else { return .ended }
            body += chunk
        }
        return .frame(body)
    }

    private func read(into buffer: inout [UInt8]) -> Bool {
        buffer.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = recv(fd, raw.baseAddress! + offset, raw.count - offset, 0)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
    }
}

extension WireWriter {
    mutating func health(_ health: PluginHealth) {
        switch health {
        case .notOffered: u8(0)
        case .healthy: u8(1)
        case .unhealthy(let status):
            u8(2)
            u32(status.rawValue)
        }
    }

    /// The counters and gauges a plugin published.
    mutating func published(_ stats: PluginStats.Snapshot) {
        u32(UInt32(stats.counters.count))
        for (name, value) in stats.counters {
            string(name)
            u64(UInt64(bitPattern: value))
        }
        u32(UInt32(stats.gauges.count))
        for (name, value) in stats.gauges {
            string(name)
            u64(value.bitPattern)
        }
    }
}

extension WireReader {
    mutating func health() throws(WireError) -> PluginHealth {
        switch try u8() {
        case 0: .notOffered
        case 1: .healthy
        default: .unhealthy(PluginStatus(rawValue: try u32()))
        }
    }

    /// Reads the counters and gauges a plugin published into `stats`.
    mutating func published(into stats: inout PluginStats.Snapshot) throws(WireError) {
        for _ in 0..<min(Int(try u32()), PluginStats.maxNames) { stats.counters[try string()] = Int64(bitPattern: try u64()) }
        for _ in 0..<min(Int(try u32()), PluginStats.maxNames) { stats.gauges[try string()] = Double(bitPattern: try u64()) }
    }
}

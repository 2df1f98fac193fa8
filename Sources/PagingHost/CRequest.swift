import CPaging
import Paging

/// Borrowed C views of engine values, valid inside the closure only (the ABI's "borrowed for
/// the call" rule).
package enum CView {
    package static func withRequest<R>(_ request: PluginRequest, _ body: (UnsafePointer<paging_request_t>) throws -> R) rethrows -> R {
        // Read out first: the closures below capture these, not the (large) request.
        let chain = request.keyChain, kind = kind(request.kind), pageSize = request.params.pageSize
        let keyBytes = chain.key.bytes, userInfo = request.params.userInfo
        return try withBytes(keyBytes) { key in
            try withOptionalKey(chain.prevKey) { prev in
                try withOptionalKey(chain.nextKey) { next in
                    try withParams(userInfo) { params, count in
                        try withIdentity(pageSize: pageSize, key: keyBytes, userInfo: userInfo) { identity in
                            var view = paging_request_t(
                                kind: kind, page_size: UInt32(clamping: pageSize),
                                key: key, prev_key: prev, next_key: next, params: params, param_count: count,
                                struct_size: UInt32(MemoryLayout<paging_request_t>.size), reserved: 0,
                                identity: identity)
                            return try withUnsafePointer(to: &view, body)
                        }
                    }
                }
            }
        }
    }

    /// A page as handed to `handle()`: its resolved keys, END flags where there are none, the
    /// SHORTENED flag on a page a transform made short, EMPTIED on one it emptied, and its
    /// metadata.
    static func withPage<R>(_ page: PluginPage, _ body: (UnsafePointer<paging_page_t>) throws -> R) rethrows -> R {
        try withRequest(page.request) { request in
            try withOptionalKey(page.prevKey) { prev in
                try withOptionalKey(page.nextKey) { next in
                    try withItems(page.values) { items, count in
                        try withParams(page.metadata) { metadata, metadataCount in
                            var flags = page.markFlags
                            if page.prevKey == nil { flags |= PAGING_PAGE_PREV_END }
                            if page.nextKey == nil { flags |= PAGING_PAGE_NEXT_END }
                            var view = paging_page_t(request: request, items: items, item_count: count,
                                                     prev_key: prev, next_key: next, flags: flags,
                                                     struct_size: UInt32(MemoryLayout<paging_page_t>.size),
                                                     metadata: metadata, metadata_count: metadataCount)
                            return try withUnsafePointer(to: &view, body)
                        }
                    }
                }
            }
        }
    }

    static func kind(_ kind: PagingRequestKind) -> UInt32 {
        switch kind {
        case .refresh: PAGING_REQUEST_REFRESH
        case .prepend: PAGING_REQUEST_PREPEND
        case .append: PAGING_REQUEST_APPEND
        }
    }

    static func withBytes<R>(_ bytes: [UInt8], _ body: (paging_bytes_t) throws -> R) rethrows -> R {
        try bytes.withUnsafeBufferPointer { buffer in
            try body(paging_bytes_t(data: buffer.baseAddress, len: buffer.count))
        }
    }

    static func withOptionalKey<R>(_ key: PluginKey?, _ body: (UnsafePointer<paging_bytes_t>?) throws -> R) rethrows -> R {
        guard let key else { return try body(nil) }
        return try withBytes(key.bytes) { bytes in
            var bytes = bytes
            return try withUnsafePointer(to: &bytes) { try body($0) }
        }
    }

    /// A request's ``PagingRequestIdentity`` encoded as types.h defines `paging_request_t.identity`
    /// (the page size, the key, then each param that identifies the page in name order, each as
    /// <length>:<bytes>), in a buffer on the stack when it is small. Built for every call into a
    /// plugin, from the request's fields rather than an identity value (which costs the chain's
    /// hot path copies): the common request, without params, is written without a sort or a string.
    static func withIdentity<R>(
        pageSize: Int, key: [UInt8], userInfo: [String: String], _ body: (paging_bytes_t) throws -> R
    ) rethrows -> R {
        let params = userInfo.isEmpty ? [] : userInfo.filter { PagingRequestIdentity<PluginKey>.identifies($0.key) }.sorted { $0.key < $1.key }
        var size = 20 + 1 + 20 + 1 + key.count
        for (name, value) in params { size += 1 + 21 + name.utf8.count + 1 + 21 + value.utf8.count }
        // A constant capacity is allocated on the stack outright.
        guard size <= 256 else {
            var heap = [UInt8](repeating: 0, count: size)
            return try heap.withUnsafeMutableBufferPointer { try body(encodeIdentity(into: $0.baseAddress!, pageSize, key, params)) }
        }
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) {
            try body(encodeIdentity(into: $0.baseAddress!, pageSize, key, params))
        }
    }

    private static func encodeIdentity(
        into start: UnsafeMutablePointer<UInt8>, _ pageSize: Int, _ key: [UInt8], _ params: [(key: String, value: String)]
    ) -> paging_bytes_t {
        var writer = IdentityWriter(start: start)
        writer.decimal(max(0, pageSize))
        writer.byte(UInt8(ascii: " "))
        key.withUnsafeBytes { writer.field($0) }
        for (name, value) in params {
            var name = name, value = value
            writer.byte(UInt8(ascii: " "))
            name.withUTF8 { writer.field(UnsafeRawBufferPointer($0)) }
            writer.byte(UInt8(ascii: "="))
            value.withUTF8 { writer.field(UnsafeRawBufferPointer($0)) }
        }
        return paging_bytes_t(data: start, len: writer.count)
    }

    /// Writes an identity into a buffer sized for it (no bounds checks: the caller sized it).
    struct IdentityWriter {
        let start: UnsafeMutablePointer<UInt8>
        var count = 0

        mutating func byte(_ byte: UInt8) {
            start[count] = byte
            count += 1
        }

        mutating func decimal(_ value: Int) {
            var digits = 1, rest = value / 10
            while rest > 0 {
                digits += 1
                rest /= 10
            }
            var number = value
            for index in stride(from: count + digits - 1, through: count, by: -1) {
                start[index] = UInt8(ascii: "0") + UInt8(number % 10)
                number /= 10
            }
            count += digits
        }

        /// <length>:<bytes>
        mutating func field(_ bytes: UnsafeRawBufferPointer) {
            decimal(bytes.count)
            byte(UInt8(ascii: ":"))
            if let base = bytes.baseAddress, !bytes.isEmpty {
                UnsafeMutableRawPointer(start + count).copyMemory(from: base, byteCount: bytes.count)
                count += bytes.count
            }
        }
    }

    /// Lays every name and value out in one buffer, then points the params into it.
    static func withParams<R>(
        _ userInfo: [String: String], _ body: (UnsafePointer<paging_param_t>?, Int) throws -> R
    ) rethrows -> R {
        guard !userInfo.isEmpty else { return try body(nil, 0) }
        var storage: [UInt8] = []
        var ranges: [(Range<Int>, Range<Int>)] = []
        for (name, value) in userInfo.sorted(by: { $0.key < $1.key }) {
            let nameStart = storage.count
            storage.append(contentsOf: name.utf8)
            let valueStart = storage.count
            storage.append(contentsOf: value.utf8)
            ranges.append((nameStart..<valueStart, valueStart..<storage.count))
        }
        return try storage.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress
            let params = ranges.map { name, value in
                paging_param_t(name: paging_bytes_t(data: base.map { $0 + name.lowerBound }, len: name.count),
                               value: paging_bytes_t(data: base.map { $0 + value.lowerBound }, len: value.count))
            }
            return try params.withUnsafeBufferPointer { try body($0.baseAddress, $0.count) }
        }
    }

    /// Lays every item out in one buffer, then points the views into it.
    static func withItems<R>(_ items: [PluginItem], _ body: (UnsafePointer<paging_bytes_t>?, Int) throws -> R) rethrows -> R {
        guard !items.isEmpty else { return try body(nil, 0) }
        var storage: [UInt8] = []
        storage.reserveCapacity(items.reduce(0) { $0 + $1.bytes.count })
        for item in items { storage.append(contentsOf: item.bytes) }
        return try storage.withUnsafeBufferPointer { buffer in
            var offset = 0
            let views = items.map { item in
                defer { offset += item.bytes.count }
                return paging_bytes_t(data: buffer.baseAddress.map { $0 + offset }, len: item.bytes.count)
            }
            return try views.withUnsafeBufferPointer { try body($0.baseAddress, $0.count) }
        }
    }
}

extension Page {
    /// Its marks as page flags: `PAGING_PAGE_SHORTENED` and `PAGING_PAGE_EMPTIED`.
    var markFlags: UInt32 {
        (isShortened ? PAGING_PAGE_SHORTENED : 0) | (isEmptiedByTransform ? PAGING_PAGE_EMPTIED : 0)
    }

    /// Takes the marks page flags carry (`PAGING_PAGE_EMPTIED` on an empty page only).
    mutating func takeMarks(_ flags: UInt32) {
        isShortened = flags & PAGING_PAGE_SHORTENED != 0
        isEmptiedByTransform = values.isEmpty && flags & PAGING_PAGE_EMPTIED != 0
    }
}

import CPaging
import Paging

/// Borrowed C views of engine values, valid inside the closure only (the ABI's "borrowed for
/// the call" rule).
package enum CView {
    package static func withRequest<R>(_ request: PluginRequest, _ body: (UnsafePointer<paging_request_t>) throws -> R) rethrows -> R {
        let chain = request.keyChain
        return try withBytes(chain.key.bytes) { key in
            try withOptionalKey(chain.prevKey) { prev in
                try withOptionalKey(chain.nextKey) { next in
                    try withParams(request.params.userInfo) { params, count in
                        try withIdentity(request.identity) { identity in
                            var view = paging_request_t(
                                kind: kind(request.kind), page_size: UInt32(clamping: request.params.pageSize),
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

    /// A page as handed to `handle()`: its resolved keys, and END flags where there are none.
    static func withPage<R>(_ page: PluginPage, _ body: (UnsafePointer<paging_page_t>) throws -> R) rethrows -> R {
        try withRequest(page.request) { request in
            try withOptionalKey(page.prevKey) { prev in
                try withOptionalKey(page.nextKey) { next in
                    try withItems(page.values) { items, count in
                        var flags: UInt32 = 0
                        if page.prevKey == nil { flags |= PAGING_PAGE_PREV_END }
                        if page.nextKey == nil { flags |= PAGING_PAGE_NEXT_END }
                        var view = paging_page_t(request: request, items: items, item_count: count,
                                                 prev_key: prev, next_key: next, flags: flags,
                                                 struct_size: UInt32(MemoryLayout<paging_page_t>.size))
                        return try withUnsafePointer(to: &view, body)
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

    /// `identity` encoded as types.h defines `paging_request_t.identity` (the page size, the
    /// key, then each param in name order, each as <length>:<bytes>), in a buffer on the stack
    /// when it is small.
    static func withIdentity<R>(_ identity: PagingRequestIdentity<PluginKey>, _ body: (paging_bytes_t) throws -> R) rethrows -> R {
        let params = identity.userInfo.isEmpty ? [] : identity.userInfo.sorted { $0.key < $1.key }
        func measured(_ count: Int) -> Int { String(count).utf8.count + 1 + count }
        var size = String(identity.pageSize).utf8.count + 1 + measured(identity.key.bytes.count)
        for (name, value) in params { size += 1 + measured(name.utf8.count) + 1 + measured(value.utf8.count) }
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer in
            var end = 0
            func write<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
                for byte in bytes {
                    buffer[end] = byte
                    end += 1
                }
            }
            func writeField<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
                write(String(bytes.count).utf8)
                write(CollectionOfOne(UInt8(ascii: ":")))
                write(bytes)
            }
            write(String(identity.pageSize).utf8)
            write(CollectionOfOne(UInt8(ascii: " ")))
            writeField(identity.key.bytes)
            for (name, value) in params {
                write(CollectionOfOne(UInt8(ascii: " ")))
                writeField(name.utf8)
                write(CollectionOfOne(UInt8(ascii: "=")))
                writeField(value.utf8)
            }
            return try body(paging_bytes_t(data: buffer.baseAddress, len: end))
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

import FoundationEssentials

/// A page key as it crosses the plugin ABI: bytes, by convention UTF-8 text.
public struct PluginKey: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    public init(_ text: String) {
        bytes = Array(text.utf8)
    }

    public init(stringLiteral text: String) {
        self.init(text)
    }

    /// The key as text, or `nil` when it is not valid UTF-8.
    public var text: String? { String(validating: bytes, as: UTF8.self) }

    public var description: String { text ?? "0x" + hexString(bytes) }
}

/// A value as it crosses the plugin ABI: bytes, by convention one JSON value.
///
/// The items a plugin hands over in one page share one buffer (one allocation a page, not one
/// an item: a malloc and a free per item cost a run that pages through an API ~5% of its time),
/// each item a slice of it; the buffer lives while any of its items does.
public struct PluginItem: Hashable, Sendable, CustomStringConvertible {
    /// The bytes, where they are kept: compared and hashed by their contents.
    package private(set) var storage: ArraySlice<UInt8>

    public init(bytes: [UInt8]) {
        storage = bytes[...]
    }

    /// An item of a page's buffer.
    package init(storage: ArraySlice<UInt8>) {
        self.storage = storage
    }

    /// An item holding the UTF-8 bytes of `json`.
    public init(json: String) {
        self.init(bytes: Array(json.utf8))
    }

    /// The bytes, as an array of their own (a copy; ``withUnsafeBytes(_:)`` and ``count`` read
    /// them in place).
    public var bytes: [UInt8] {
        get { Array(storage) }
        set { storage = newValue[...] }
    }

    /// How many bytes the item has.
    public var count: Int { storage.count }

    /// Calls `body` with the item's bytes, in place.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes(body)
    }

    /// The item as text (invalid UTF-8 is replaced).
    public var text: String { String(decoding: storage, as: UTF8.self) }

    /// Decodes the item's JSON as `type`: the typed layer over a loaded pipeline.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(storage))
    }

    public var description: String { text }
}

/// The engine's types for a pipeline of loaded plugins.
public typealias PluginPager = Pager<PluginKey, PluginItem>
public typealias PluginPage = Page<PluginKey, PluginItem>
public typealias PluginRequest = PagingRequest<PluginKey>

import Paging

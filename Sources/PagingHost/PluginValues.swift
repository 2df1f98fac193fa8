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

    /// The bytes at once: the array's own hashing feeds them one at a time (keys are URLs, and
    /// a page's key is hashed several times a load).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// A value as it crosses the plugin ABI: bytes, by convention one JSON value.
public struct PluginItem: Hashable, Sendable, CustomStringConvertible {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// An item holding the UTF-8 bytes of `json`.
    public init(json: String) {
        bytes = Array(json.utf8)
    }

    /// The item as text (invalid UTF-8 is replaced).
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Decodes the item's JSON as `type`: the typed layer over a loaded pipeline.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(bytes))
    }

    public var description: String { text }

    /// The bytes at once (see ``PluginKey/hash(into:)``).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// The engine's types for a pipeline of loaded plugins.
public typealias PluginPager = Pager<PluginKey, PluginItem>
public typealias PluginPage = Page<PluginKey, PluginItem>
public typealias PluginRequest = PagingRequest<PluginKey>

import Paging

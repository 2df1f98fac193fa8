import CPaging
import Foundation

/// The `config` object of one plugin as the plugin's `create_*` call sees it through
/// `paging_config_t`: its JSON text and typed reads of its top-level values.
///
/// The C strings it hands out live as long as this object, which the host keeps until the
/// `create_*` call returns.
package final class PluginConfig {
    static let liveMagic: UInt64 = 0x5041_4749_4E47_4346 // "PAGINGCF"

    private var magic = PluginConfig.liveMagic
    let value: JSONValue
    private(set) lazy var jsonCString: UnsafePointer<CChar> = retain(value.jsonText)
    private var strings: [UnsafeMutablePointer<CChar>] = []
    /// What the plugin reported through `config_fail`.
    var failure: (PluginStatus, String)?

    package init(_ value: JSONValue) {
        self.value = value
    }

    deinit {
        magic = 0
        for string in strings { free(string) }
    }

    static func from(_ config: OpaquePointer?) -> PluginConfig? {
        guard let raw = UnsafeRawPointer(config) else { return nil }
        let instance = Unmanaged<PluginConfig>.fromOpaque(raw).takeUnretainedValue()
        return instance.magic == liveMagic ? instance : nil
    }

    /// Runs `body` with a `paging_config_t *` for this config.
    package func withPointer<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(self) {
            try body(OpaquePointer(Unmanaged.passUnretained(self).toOpaque()))
        }
    }

    func string(for key: String) -> UnsafePointer<CChar>? {
        guard case .string(let text) = value[key] else { return nil }
        return retain(text)
    }

    func int(for key: String) -> Int64? {
        guard case .int(let number) = value[key] else { return nil }
        return number
    }

    func bool(for key: String) -> Bool? {
        guard case .bool(let flag) = value[key] else { return nil }
        return flag
    }

    func double(for key: String) -> Double? {
        switch value[key] {
        case .int(let number): Double(number)
        case .double(let number): number
        default: nil
        }
    }

    private func retain(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text)!
        strings.append(copy)
        return UnsafePointer(copy)
    }
}

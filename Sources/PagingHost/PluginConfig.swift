import CPaging
import FoundationEssentials
import Glibc

/// The `config` object of one plugin as the plugin's `create_*` call sees it through
/// `paging_config_t`: its JSON text and typed reads of its top-level values.
///
/// The C strings it hands out live as long as this object, which the host keeps until the
/// `create_*` call returns.
package final class PluginConfig {
    let value: JSONValue
    /// The C strings handed out, one a key: a plugin that read a 1 MB value 1,000 times held
    /// 1,000 copies until its create returned (833 MB, and the create timed out).
    private var strings: [String: UnsafeMutablePointer<CChar>] = [:]
    private var json: UnsafeMutablePointer<CChar>?
    /// What the plugin reported through `config_fail`.
    var failure: (PluginStatus, String)?
    /// The first use of a config handle the host refused during the create call (a config kept
    /// from another create, this one's from another thread): the create fails, as the plugin
    /// was refused what it read, or the failure it reported.
    var misuse: String?
    /// The instance being created, which the host's refusals are logged against.
    private var owner: PluginInstance?

    package init(_ value: JSONValue) {
        self.value = value
    }

    deinit {
        for string in strings.values { free(string) }
        free(json)
    }

    /// The config behind the handle `config` when it is live on this thread (see ``CallHandle``).
    static func from(_ config: OpaquePointer?, _ function: String) -> PluginConfig? {
        CallHandle.resolve(config, .config, function, as: PluginConfig.self) { running, refusal in
            if running.misuse == nil { running.misuse = refusal }
        }?.pointee
    }

    /// The config and key of a getter's call, or nil (answered as for an absent key): a NULL
    /// key is refused, and logged (it read as "", a key a config may have).
    static func lookup(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ function: String) -> (config: PluginConfig, key: String)? {
        guard let found = from(config, function) else { return nil }
        guard let key else {
            found.owner?.log(.error, "\(function) called with a NULL key: answered as for a key the config does not have")
            return nil
        }
        return (found, PagingHost.string(key))
    }

    /// Runs `body` with a `paging_config_t *` handle for this config, live on this thread until
    /// `body` returns: the handle of `instance`'s create call.
    package func withHandle<R>(_ instance: PluginInstance, _ body: (OpaquePointer) -> R) -> R {
        owner = instance
        var config = self
        let token = CallHandle.token(for: instance), refusals = CallHandle.refusals
        let result = withUnsafeMutablePointer(to: &config) { CallHandle.with(.config, token, $0, body) }
        if misuse == nil, let refused = CallHandle.misuse(of: token, .config, since: refusals) { misuse = refused }
        return result
    }

    /// `PAGING_CONFIG_*` for the top-level `key`.
    func type(for key: String) -> UInt32 {
        switch value[key] {
        case nil: PAGING_CONFIG_ABSENT
        case .null: PAGING_CONFIG_NULL
        case .bool: PAGING_CONFIG_BOOL
        case .int: PAGING_CONFIG_INT
        case .double, .number: PAGING_CONFIG_DOUBLE
        case .string: PAGING_CONFIG_STRING
        case .array: PAGING_CONFIG_ARRAY
        case .object: PAGING_CONFIG_OBJECT
        }
    }

    /// The string under `key` as a C string; `nil` when it is not a string, or holds a NUL
    /// character: as a C string it would end there, and the plugin would read a shorter value
    /// (a path cut short names another file). That refusal is logged against the plugin.
    package func string(for key: String) -> UnsafePointer<CChar>? {
        if let copy = strings[key] { return UnsafePointer(copy) }
        guard case .string(let text) = value[key] else { return nil }
        guard !text.utf8.contains(0) else {
            owner?.log(.error, "config_string(\"\(key)\"): the value holds a NUL character (U+0000), which a C string cannot "
                       + "carry; the plugin was given NULL")
            return nil
        }
        let copy = strdup(text)!
        strings[key] = copy
        return UnsafePointer(copy)
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
        value[key]?.doubleValue
    }

    /// The whole config as JSON text.
    package var jsonCString: UnsafePointer<CChar> {
        if json == nil { json = strdup(value.jsonText)! }
        return UnsafePointer(json!)
    }
}

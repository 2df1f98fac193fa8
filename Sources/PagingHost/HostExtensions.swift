import CPaging

/// The extensions this host offers plugins (`host->get_extension`, extensions.h), by id.
enum HostExtensions {
    /// `paging.log-level/1`: the lowest level the instance's log sink keeps.
    private nonisolated(unsafe) static let logLevel: UnsafeMutablePointer<paging_ext_log_level_t> = {
        let table = UnsafeMutablePointer<paging_ext_log_level_t>.allocate(capacity: 1)
        table.initialize(to: paging_ext_log_level_t(min_level: { host in
            PluginInstance.with(host) { $0.limits.logLevel.rawValue } ?? PAGING_LOG_TRACE
        }))
        return table
    }()

    /// The ids offered, and their tables.
    private nonisolated(unsafe) static let offered: [String: UnsafeRawPointer] = [
        PAGING_EXT_LOG_LEVEL: UnsafeRawPointer(logLevel),
    ]

    static func offers(_ id: String) -> Bool { offered[id] != nil }

    static func table(for id: UnsafePointer<CChar>) -> UnsafeRawPointer? { offered[String(cString: id)] }
}

/// The extensions a plugin instance offers the host (`get_extension` of its table).
struct InstanceExtensions: @unchecked Sendable {
    /// `paging.health/1`.
    let health: UnsafePointer<paging_ext_health_t>?

    static let none = InstanceExtensions(health: nil)

    /// Asks the instance for every extension the host uses. `lookup` is the instance's
    /// `get_extension`, or `nil` when its table has none (a draft library, or NULL).
    init(_ lookup: ((UnsafePointer<CChar>) -> UnsafeRawPointer?)?) {
        guard let lookup else {
            health = nil
            return
        }
        health = lookup(PAGING_EXT_HEALTH).map { $0.assumingMemoryBound(to: paging_ext_health_t.self) }
    }

    private init(health: UnsafePointer<paging_ext_health_t>?) {
        self.health = health
    }
}

/// What an instance says about its health (`paging.health/1`).
public enum PluginHealth: Sendable, Equatable {
    /// The instance does not offer the check.
    case notOffered
    case healthy
    case unhealthy(PluginStatus)
}

extension PluginInstance {
    /// Runs the instance's health check, serialized with its other calls.
    func health<Table>(_ extensions: InstanceExtensions, _ plugin: UnsafeMutablePointer<Table>, _ calls: SerializedCalls) -> PluginHealth {
        guard let check = extensions.health?.pointee.check else { return .notOffered }
        guard let status = calls.run({ check(UnsafeMutableRawPointer(plugin)) }) else { return .unhealthy(.cancelled) }
        return status == PAGING_OK ? .healthy : .unhealthy(PluginStatus(failure: status))
    }
}

import CPaging
import FoundationEssentials
import Glibc
import Paging

/// How many bytes of a plugin-owned struct its library says it wrote (version.h, rule 2): its
/// `struct_size`, or the 1.0 draft's size when that is 0 (a library built against the draft
/// headers left those bytes zero).
package struct DeclaredSize<Struct>: Sendable {
    package let bytes: Int

    /// - Parameter draft: the member that follows the draft's last one (the draft's size).
    init(_ structSize: UInt32, draft: PartialKeyPath<Struct>) {
        bytes = structSize == 0 ? MemoryLayout<Struct>.offset(of: draft)! : Int(structSize)
    }

    /// Whether the writer's struct holds `member`.
    package func holds<Member>(_ member: KeyPath<Struct, Member>) -> Bool {
        MemoryLayout<Struct>.offset(of: member)! + MemoryLayout<Member>.size <= bytes
    }

    /// Whether the writer's struct is smaller than the draft's, which no library ever wrote.
    func isTooSmall(draft: PartialKeyPath<Struct>) -> Bool { bytes < MemoryLayout<Struct>.offset(of: draft)! }
}

// The draft's size of each plugin-owned struct is the offset of its first 1.0 member. Members
// are read one by one through the pointer, never by copying the whole struct, which a draft
// library's smaller struct does not fill.
extension DeclaredSize<paging_plugin_entry_t> {
    init(_ entry: UnsafePointer<paging_plugin_entry_t>) { self.init(entry.pointee.struct_size, draft: \.`init`) }
}

extension DeclaredSize<paging_plugin_descriptor_t> {
    init(_ descriptor: UnsafePointer<paging_plugin_descriptor_t>) {
        self.init(descriptor.pointee.struct_size, draft: \.required_extensions)
    }
}

/// An instance table's `get_extension` as a lookup, when its library is not draft-built and its
/// table holds the member and sets it (a draft library's table ends before struct_size).
package func extensionLookup(
    _ plugin: UnsafeMutablePointer<paging_source_t>, isDraft: Bool
) -> ((UnsafePointer<CChar>) -> UnsafeRawPointer?)? {
    guard !isDraft, DeclaredSize(plugin).holds(\.get_extension), let lookup = plugin.pointee.get_extension else { return nil }
    return { lookup(plugin, $0) }
}

package func extensionLookup(
    _ plugin: UnsafeMutablePointer<paging_interceptor_t>, isDraft: Bool
) -> ((UnsafePointer<CChar>) -> UnsafeRawPointer?)? {
    guard !isDraft, DeclaredSize(plugin).holds(\.get_extension), let lookup = plugin.pointee.get_extension else { return nil }
    return { lookup(plugin, $0) }
}

extension DeclaredSize<paging_source_t> {
    init(_ source: UnsafeMutablePointer<paging_source_t>) { self.init(source.pointee.struct_size, draft: \.struct_size) }
}

extension DeclaredSize<paging_interceptor_t> {
    init(_ interceptor: UnsafeMutablePointer<paging_interceptor_t>) {
        self.init(interceptor.pointee.struct_size, draft: \.struct_size)
    }
}

/// The host program, as a library's `init()` learns it (`paging_library_info_t`).
public struct PluginHostIdentity: Sendable {
    public var name: String
    public var version: String

    public init(name: String, version: String) {
        self.name = name
        self.version = version
    }

    /// The version of SwiftPaging.
    public static let frameworkVersion = "1.0.0"

    /// This program: the name of its executable, and SwiftPaging's version.
    public static var current: PluginHostIdentity {
        get { identity.withLock { $0 } }
        set { identity.withLock { $0 = newValue } }
    }

    private static let identity = Locked(PluginHostIdentity(
        name: URL(fileURLWithPath: CommandLine.arguments.first ?? "host").lastPathComponent, version: frameworkVersion))
}

extension PluginLibrary {
    /// Where libraries' own log lines go (what `init()` logs, and the host's notes about a
    /// library): the level, the library path and the message. Standard error by default.
    public static var librarySink: PluginLogSink {
        get { sinkStorage.withLock { $0.sink } }
        set { sinkStorage.withLock { $0.sink = newValue } }
    }

    /// In a struct: a closure that is a generic ``Locked``'s state itself gains two
    /// reabstraction thunks at each access (see `PluginInstance.SinkState`).
    private struct LibrarySink {
        var sink: PluginLogSink
    }

    private static let sinkStorage = Locked(LibrarySink(sink: { level, library, message in
        writeToStandardError("[\(level)] \(library): \(message)\n")
    }))

    /// Checks the entry's version and size, runs the library's `init()`, and reads its
    /// descriptors, refusing any whose ABI major differs from the host's.
    static func readEntry(
        _ entry: UnsafePointer<paging_plugin_entry_t>, path: String, within timeout: Duration
    ) throws(PluginLoadError) -> (PluginABIVersion, [PluginDescriptor]) {
        let version = PluginABIVersion(entry.pointee.abi_version)
        guard paging_version_is_compatible(PluginABIVersion.host.cValue, entry.pointee.abi_version) != 0 else {
            throw .abiMajorMismatch(path: path, library: version, host: .host)
        }
        let size = DeclaredSize(entry)
        if size.isTooSmall(draft: \.`init`) {
            throw .invalidEntry(path: path, reason: "the entry's struct_size is \(entry.pointee.struct_size), smaller than any ABI 1.0 entry")
        }
        guard size.holds(\.`init`), let initialize = entry.pointee.`init` else {
            return (version, try readDescriptors(entry, path: path))
        }
        try runInit(initialize, path: path, within: timeout)
        do {
            return (version, try readDescriptors(entry, path: path))
        } catch {
            // Refused after init() succeeded: the library may release what it prepared.
            if size.holds(\.deinit) { PluginCrash.calling(PluginCrash.label(path)) { entry.pointee.deinit?() } }
            throw error
        }
    }

    private static func runInit(
        _ initialize: @convention(c) (UnsafePointer<paging_library_info_t>?) -> paging_status_t, path: String,
        within timeout: Duration
    ) throws(PluginLoadError) {
        // Kept for as long as the process (never released), the info too: a library may keep
        // it past init() and call its log later, which is refused, not a read of freed memory;
        // an init() that does not return in time may still read it.
        let log = InitLog(path: path)
        let info = UnsafeMutablePointer<paging_library_info_t>.allocate(capacity: 1)
        info.initialize(to: paging_library_info_t(
            struct_size: UInt32(MemoryLayout<paging_library_info_t>.size),
            host_abi_version: PluginABIVersion.host.cValue,
            library_path: log.path.c, host_name: log.hostName.c, host_version: log.hostVersion.c,
            host_data: Unmanaged.passRetained(log).toOpaque(),
            log: { info, level, message in
                guard let data = info?.pointee.host_data else { return }
                let (level, text) = logLine(level, message)
                Unmanaged<InitLog>.fromOpaque(data).takeUnretainedValue().write(level, text)
            }))
        let call = UnsafeSendable((initialize, info)), label = PluginCrash.label(path)
        guard let status = boundedCall(named: "paging-init", within: timeout, { PluginCrash.calling(label) { call.value.0(call.value.1) } }) else {
            throw .loadTimedOut(path: path, timeout: timeout)
        }
        let last = log.close()
        guard status == PAGING_OK else {
            throw .initFailed(path: path, status: PluginStatus(rawValue: status), message: last ?? "init() gave no reason")
        }
    }

    /// What a library's `init()` logs: passed on to ``librarySink``, the last line kept as the
    /// reason when it refuses to load. Once init() has returned, a call is refused (said once).
    private final class InitLog: Sendable {
        /// A C string kept as long as its owner.
        final class CString: Sendable {
            nonisolated(unsafe) let c: UnsafeMutablePointer<CChar>
            init(_ text: String) { c = strdup(text)! }
            deinit { free(c) }
        }

        let path: CString, hostName: CString, hostVersion: CString
        private let library: String
        private let state = Locked<(last: String?, open: Bool, refused: Bool)>((nil, true, false))

        init(path: String) {
            library = path
            self.path = CString(path)
            hostName = CString(PluginHostIdentity.current.name)
            hostVersion = CString(PluginHostIdentity.current.version)
        }

        func write(_ level: PluginLogLevel, _ message: String) {
            let (open, first) = state.withLock { state -> (Bool, Bool) in
                if state.open { state.last = message }
                defer { if !state.open { state.refused = true } }
                return (state.open, !state.refused)
            }
            if open {
                PluginLibrary.librarySink(level, library, message)
            } else if first {
                PluginLibrary.librarySink(.error, library, "init()'s log called after init() returned (the library info is for the init() call only): ignored")
            }
        }

        /// init() returned: later calls are refused. The last line it logged.
        func close() -> String? {
            state.withLock { state in
                state.open = false
                return state.last
            }
        }
    }

    private static func readDescriptors(
        _ entry: UnsafePointer<paging_plugin_entry_t>, path: String
    ) throws(PluginLoadError) -> [PluginDescriptor] {
        guard let count = entry.pointee.plugin_count, let describe = entry.pointee.descriptor else {
            throw .invalidEntry(path: path, reason: "plugin_count or descriptor is NULL")
        }
        let label = PluginCrash.label(path)
        let total = PluginCrash.calling(label) { count() }
        guard total <= 1_000 else { throw .invalidEntry(path: path, reason: "plugin_count() returned \(total)") }
        var descriptors: [PluginDescriptor] = []
        for index in 0..<total {
            guard let raw = PluginCrash.calling(label, { describe(index) }) else {
                throw .invalidEntry(path: path, reason: "descriptor(\(index)) returned NULL")
            }
            let d = raw
            guard let rawID = d.pointee.id, rawID.pointee != 0 else {
                throw .invalidEntry(path: path, reason: "descriptor \(index) has no id")
            }
            // A manifest names a plugin by its id, and create gets it back: bytes that are not
            // UTF-8 would be neither (they became U+FFFD, another id).
            guard let id = String(validatingCString: rawID) else {
                let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(rawID).assumingMemoryBound(to: UInt8.self), count: strnlen(rawID, 64))
                throw .invalidEntry(path: path, reason: "the id of descriptor \(index) is not UTF-8 text (its first bytes in hex: \(hexString(bytes))); a manifest names a plugin by its id")
            }
            let abiVersion = PluginABIVersion(d.pointee.abi_version)
            guard paging_version_is_compatible(PluginABIVersion.host.cValue, d.pointee.abi_version) != 0 else {
                throw .descriptorABIMismatch(path: path, id: id, plugin: abiVersion, host: .host)
            }
            let size = DeclaredSize(d)
            if size.isTooSmall(draft: \.required_extensions) {
                throw .invalidEntry(path: path, reason: "plugin '\(id)': the descriptor's struct_size is \(d.pointee.struct_size), smaller than any ABI 1.0 descriptor")
            }
            guard let kind = PluginKind(d.pointee.kind) else {
                throw .invalidEntry(path: path, reason: "plugin '\(id)' has unknown kind \(d.pointee.kind)")
            }
            var required: [String] = []
            if size.holds(\.required_extensions), var next = d.pointee.required_extensions {
                while let id = next.pointee, required.count < 64 {
                    required.append(String(cString: id))
                    next += 1
                }
            }
            descriptors.append(PluginDescriptor(
                id: id,
                name: d.pointee.name.map { String(cString: $0) } ?? id,
                version: d.pointee.version.map { String(cString: $0) } ?? "",
                description: d.pointee.description.map { String(cString: $0) } ?? "",
                kind: kind,
                isThreadSafe: d.pointee.flags & PAGING_PLUGIN_THREAD_SAFE != 0,
                abiVersion: abiVersion,
                isDraft: d.pointee.struct_size == 0,
                requiredExtensions: required))
        }
        return descriptors
    }
}

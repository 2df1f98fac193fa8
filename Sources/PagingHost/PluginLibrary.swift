import CPaging
import CCallFrame
import CLazyBinding
import FoundationEssentials
import Glibc
import Paging
import Synchronization

/// The ABI version a library or the host was built against.
public struct PluginABIVersion: Sendable, Equatable, CustomStringConvertible {
    public var major: UInt32
    public var minor: UInt32
    public var patch: UInt32

    public init(major: UInt32, minor: UInt32, patch: UInt32) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    package init(_ version: paging_version_t) {
        major = version.major
        minor = version.minor
        patch = version.patch
    }

    /// The version this host implements.
    public static let host = PluginABIVersion(paging_version_t(
        major: PAGING_ABI_VERSION_MAJOR, minor: PAGING_ABI_VERSION_MINOR, patch: PAGING_ABI_VERSION_PATCH))

    var cValue: paging_version_t { paging_version_t(major: major, minor: minor, patch: patch) }

    public var description: String { "\(major).\(minor).\(patch)" }
}

/// Whether a plugin is a source or an interceptor.
public enum PluginKind: String, Sendable {
    case source
    case interceptor

    package init?(_ raw: UInt32) {
        switch raw {
        case PAGING_PLUGIN_SOURCE: self = .source
        case PAGING_PLUGIN_INTERCEPTOR: self = .interceptor
        default: return nil
        }
    }
}

/// What a library says about one of its plugins.
public struct PluginDescriptor: Sendable {
    public let id: String
    public let name: String
    public let version: String
    public let description: String
    public let kind: PluginKind
    /// The plugin accepts overlapping calls; otherwise the host serializes them.
    public let isThreadSafe: Bool
    public let abiVersion: PluginABIVersion
    /// Built against the 1.0 draft headers (its structs hold no `struct_size`).
    public let isDraft: Bool
    /// The host extensions it cannot work without.
    public let requiredExtensions: [String]

    /// The first of ``requiredExtensions`` this host does not offer.
    public var missingExtension: String? { missingExtension(withholding: []) }

    /// The first of ``requiredExtensions`` this host does not offer, or withholds
    /// (``PluginLimits/withheldExtensions``).
    public func missingExtension(withholding withheld: Set<String>) -> String? {
        requiredExtensions.first { !HostExtensions.offers($0, withholding: withheld) }
    }
}

/// Why a plugin library or plugin could not be loaded. Every case names the file.
public enum PluginLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    case fileNotFound(path: String)
    case notAFile(path: String)
    /// A FIFO, socket or device: `kind` says which.
    case notARegularFile(path: String, kind: String)
    case unreadable(path: String, reason: String)
    case notASharedObject(path: String, reason: String)
    case loadFailed(path: String, reason: String)
    case noEntrySymbol(path: String)
    case invalidEntry(path: String, reason: String)
    case abiMajorMismatch(path: String, library: PluginABIVersion, host: PluginABIVersion)
    case descriptorABIMismatch(path: String, id: String, plugin: PluginABIVersion, host: PluginABIVersion)
    case missingExtension(path: String, id: String, plugin: PluginABIVersion, host: PluginABIVersion, extension: String)
    case initFailed(path: String, status: PluginStatus, message: String)
    /// Its constructors or init() did not return within `timeout`.
    case loadTimedOut(path: String, timeout: Duration)
    case unknownPlugin(path: String, id: String, available: [String])
    case ambiguousPlugin(path: String, kind: PluginKind, available: [String])
    case wrongKind(path: String, id: String, expected: PluginKind, actual: PluginKind)
    case createFailed(path: String, id: String, status: PluginStatus, message: String)
    case checksumMismatch(path: String, expected: String, actual: String)
    case pluginNotFound(name: String, searched: [String])

    public var description: String {
        switch self {
        case .fileNotFound(let path):
            "\(path): no such file"
        case .notAFile(let path):
            "\(path): is a folder, expected a shared library file"
        case .notARegularFile(let path, let kind):
            "\(path): is \(kind), expected a shared library file"
        case .unreadable(let path, let reason):
            "\(path): cannot be read: \(reason)"
        case .notASharedObject(let path, let reason):
            "\(path): not a shared object (\(reason))"
        case .loadFailed(let path, let reason):
            "\(path): dlopen failed: \(reason)"
        case .noEntrySymbol(let path):
            "\(path): no '\(PAGING_PLUGIN_ENTRY_SYMBOL_NAME)' symbol: not a SwiftPaging plugin"
        case .invalidEntry(let path, let reason):
            "\(path): invalid plugin entry: \(reason)"
        case .abiMajorMismatch(let path, let library, let host):
            "\(path): built for plugin ABI \(library), this host implements \(host) (the major versions must match)"
        case .descriptorABIMismatch(let path, let id, let plugin, let host):
            "\(path): plugin '\(id)' is built for plugin ABI \(plugin), this host implements \(host) (the major versions must match)"
        case .missingExtension(let path, let id, let plugin, let host, let needed):
            "\(path): plugin '\(id)' (built for plugin ABI \(plugin)) needs extension '\(needed)', which this host (ABI \(host)) does not offer"
        case .initFailed(let path, let status, let message):
            "\(path): the library's init() refused to load: \(status): \(message)"
        case .loadTimedOut(let path, let timeout):
            "\(path): loading the library did not finish within \(timeout) (its constructors or init() did not return; \(PluginLimits.lifecycleTimeoutSetting))"
        case .unknownPlugin(let path, let id, let available):
            "\(path): has no plugin '\(id)' (it has: \(available.isEmpty ? "none" : available.joined(separator: ", ")))"
        case .ambiguousPlugin(let path, let kind, let available):
            "\(path): holds several \(kind) plugins (\(available.joined(separator: ", "))); name one with \"id\""
        case .wrongKind(let path, let id, let expected, let actual):
            "\(path): plugin '\(id)' is \(actual == .source ? "a source" : "an interceptor"), expected \(expected == .source ? "a source" : "an interceptor")"
        case .createFailed(let path, let id, let status, let message):
            "\(path): plugin '\(id)' could not be created: \(status): \(message)"
        case .checksumMismatch(let path, let expected, let actual):
            "\(path): sha256 is \(actual), the manifest pins \(expected)"
        case .pluginNotFound(let name, let searched) where name.hasSuffix(".so"):
            "plugin '\(name)': \(name) not found in \(searched.joined(separator: ", "))"
        case .pluginNotFound(let name, let searched):
            // Found by a probe: `pager plugins` lists ids, which were then tried as names.
            "plugin '\(name)': lib\(name).so not found in \(searched.joined(separator: ", ")) (a plugin of a library "
                + "that holds several is named \"plugin\": the library's name, \"id\": the plugin's; `pager plugins` lists them)"
        }
    }
}

package let PAGING_PLUGIN_ENTRY_SYMBOL_NAME = "paging_plugin_entry"

/// A plugin library opened with dlopen: its entry, ABI version and plugin descriptors.
///
/// Libraries are opened with `RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE` and never closed:
/// unloading a Swift library breaks the host's later dynamic casts, and plugin instances may
/// outlive any one owner. Lazy binding spares binding the imports of dependencies a run never
/// calls (libcurl's ~30 libraries); the library's own imports are still checked at load
/// (`paging_unbound_function`), so a missing function is a load error, not a crash later.
///
/// The file is opened once, and everything the loader checks is read through that one file
/// descriptor. A library pinned with a SHA-256, and a file that changed after it was first
/// loaded, are loaded from a sealed in-memory copy (a memfd) of the bytes that were hashed, so
/// what runs is exactly what was checked, whatever happens to the file meanwhile. Such a
/// library is loaded from `/proc/self/fd/N`, not from its folder: `$ORIGIN` in its `RUNPATH`
/// does not point at its folder, and backtraces name it `/memfd:<file name>`.
///
/// Opening the same path again returns the same library while the file is unchanged (same
/// device, inode, size, modification and change times). When the file changed, the new file
/// is loaded as a new mapping (dlopen by the same name would return the old one) and the
/// change is reported; instances made from the earlier library keep running it. A change that
/// keeps the size and lands within one tick of the file system's clock can go unseen. Replace a
/// library by renaming a new file over it: writing into a file that was loaded by its path
/// (an unpinned library) also changes the code of the library already mapped from it.
///
/// # Thread safety
/// Immutable; safe from any thread. Opens are serialized.
public final class PluginLibrary: @unchecked Sendable {
    public let path: String
    public let abiVersion: PluginABIVersion
    public let descriptors: [PluginDescriptor]
    /// What dlopen loaded: `path`, or `/proc/self/fd/N` for a library loaded from a sealed
    /// in-memory copy of its file (a pinned library, or a file that changed after it was first
    /// loaded). That descriptor stays open for the life of the process.
    public let loadedFrom: String
    /// The SHA-256 (lowercase hex) of the bytes loaded, when they came from an in-memory copy;
    /// `nil` when dlopen read `path` itself.
    public let loadedSHA256: String?
    package let entry: UnsafePointer<paging_plugin_entry_t>
    /// How a crash in a call into it names it (``PluginCrash``).
    let crashLabel: UInt
    /// Instances created and not yet destroyed: `deinit()` waits for none to be left.
    let liveInstances = Atomic<Int>(0)
    private let deinitialized = Atomic<Bool>(false)

    /// Something ``open(path:sha256:report:)`` noticed that the user should hear about.
    public struct OpenNote: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            /// The file changed since a library was loaded from it in this process: the library
            /// returned is a new mapping of the new file; instances made from the earlier one
            /// keep running the earlier mapping.
            case fileChanged
        }

        public let kind: Kind
        /// The library file, as ``PluginLibrary/path``.
        public let path: String

        public var description: String {
            switch kind {
            case .fileChanged:
                "\(path): the file changed since it was first loaded; it is loaded again: new instances run the new code, "
                    + "instances created before run the earlier library"
            }
        }
    }

    /// Calls the `deinit()` of every library opened (once each), for a clean shutdown of the
    /// host: after every instance of it was destroyed. A library with instances left is skipped
    /// (they may still call it), and reported to ``librarySink``.
    public static func shutDown() {
        for library in loader.withLock({ $0.libraries.values.map(\.library) }) { library.deinitialize() }
    }

    private func deinitialize() {
        guard DeclaredSize(entry).holds(\.deinit), let finish = entry.pointee.deinit else { return }
        let live = liveInstances.load(ordering: .acquiring)
        guard live == 0 else {
            Self.librarySink(.debug, path, "deinit() not called: \(live) instance(s) not destroyed")
            return
        }
        guard !deinitialized.exchange(true, ordering: .acquiringAndReleasing) else { return }
        PluginCrash.calling(crashLabel) { finish() }
    }

    private init(path: String, loadedFrom: String, loadedSHA256: String?, entry: UnsafePointer<paging_plugin_entry_t>,
                 abiVersion: PluginABIVersion, descriptors: [PluginDescriptor]) {
        self.path = path
        self.loadedFrom = loadedFrom
        self.loadedSHA256 = loadedSHA256
        self.entry = entry
        self.abiVersion = abiVersion
        self.descriptors = descriptors
        crashLabel = PluginCrash.label(path)
    }

    /// Whether a library's constructors never returned from dlopen: the C library's loader
    /// lock is then held for good, so no library loads in this process any more, and it must
    /// end with `_exit` (`exit` runs the libraries' destructors, which waits for that lock).
    public static var isLoaderStuck: Bool { stuckLoading.load(ordering: .relaxed) }
    private static let stuckLoading = Atomic<Bool>(false)

    /// Whether a plugin's destroy() was left running (``PluginLimits/lifecycleTimeout``): the
    /// process must then end with `_exit`, as `exit` would run the libraries' destructors and
    /// atexit handlers under the destroy() still running.
    public static var isDestroyLeftRunning: Bool { destroyLeftRunning.load(ordering: .acquiring) }
    static let destroyLeftRunning = Atomic<Bool>(false)

    /// Opens the library at `path` and reads its descriptors.
    ///
    /// - Parameters:
    ///   - sha256: the SHA-256 the library's bytes must have (64 hex digits, any case). The file
    ///     is copied into a sealed memfd while it is hashed, and that copy is what is loaded; a
    ///     different checksum throws ``PluginLoadError/checksumMismatch(path:expected:actual:)``
    ///     and loads nothing. A library already loaded from this path is reused only when the
    ///     file is unchanged and its bytes are known to have this checksum.
    ///   - timeout: how long its constructors and its `init()` may take, each (then
    ///     ``PluginLoadError/loadTimedOut(path:timeout:)``).
    ///   - report: receives what the user should be told, such as a file that changed since it
    ///     was first loaded (after the library is loaded, on the calling thread).
    /// - Throws: a ``PluginLoadError`` naming the file: missing, a folder or another kind of
    ///   file than a regular one (a FIFO is refused without blocking), unreadable, not a shared
    ///   object, a checksum mismatch, or a library that fails to load or is no plugin.
    public static func open(
        path: String, sha256: String? = nil, within timeout: Duration = PluginLimits().lifecycleTimeout, report: (OpenNote) -> Void = { _ in }
    ) throws(PluginLoadError) -> PluginLibrary {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        let pin = sha256?.lowercased()
        let (library, note) = try ExitGuard.during("the library \(path)") { () throws(PluginLoadError) in
            try loader.withLock { (state: inout LoaderState) throws(PluginLoadError) in
                try load(path: path, pin: pin, within: timeout, state: &state)
            }
        }
        if let note { report(note) }
        return library
    }

    // MARK: - Loading

    /// Who a file is, as far as `stat` tells: a change of content changes one of these (unless
    /// it keeps the size and lands within one tick of the file system's clock).
    struct FileIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: Int64
        let modifiedNanoseconds: Int
        let changed: Int64
        let changedNanoseconds: Int

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = Int64(info.st_mtim.tv_sec)
            modifiedNanoseconds = info.st_mtim.tv_nsec
            changed = Int64(info.st_ctim.tv_sec)
            changedNanoseconds = info.st_ctim.tv_nsec
        }

        struct Inode: Hashable {
            let device: UInt64
            let inode: UInt64
        }

        var fileID: Inode { Inode(device: device, inode: inode) }
    }

    private struct Cached {
        let library: PluginLibrary
        /// The file's identity when the library was loaded from it.
        var identity: FileIdentity
        /// The file's SHA-256 at `identity`, when known: the bytes loaded from a copy, or a pin
        /// checked against the unchanged file.
        var fileSHA256: String?
    }

    private struct LoaderState {
        /// The library each path last loaded.
        var libraries: [String: Cached] = [:]
        /// The files glibc has loaded by path (it matches later opens by name, then by device
        /// and inode), with their identity then: such a file, changed, is loaded from a copy.
        var loadedByName: [String: FileIdentity] = [:]
        var loadedInodes: [FileIdentity.Inode: FileIdentity] = [:]
        /// The memfds libraries were loaded from. Never closed: the libraries are never
        /// unloaded, and glibc matches loaded libraries by name, so a `/proc/self/fd/N` whose
        /// number was reused would find the earlier library.
        var memfds: [Int32] = []
    }

    private static let loader = Locked(LoaderState())

    /// Each library loaded, by the file name glibc knows it by (its path, or the
    /// `/proc/self/fd/N` of its copy): apart from the loader's lock, which a load holds while
    /// a library's constructors run.
    private static let loadedFiles = Locked<[String: String]>([:])

    /// The libraries loaded, by the file name glibc knows each by (`dladdr`'s), to their path.
    static var loadedPaths: [String: String] { loadedFiles.withLock { $0 } }

    private static func load(
        path: String, pin: String?, within timeout: Duration, state: inout LoaderState
    ) throws(PluginLoadError) -> (PluginLibrary, OpenNote?) {
        // One stat decides whether the library already loaded from this path still stands for
        // the file; it also refuses a FIFO or a device before opening it.
        var info = stat()
        guard stat(path, &info) == 0 else { throw fileError(path, errno) }
        try checkType(info, path: path)
        let previous = state.libraries[path]
        if let previous, previous.identity == FileIdentity(info) {
            guard let pin else { return (previous.library, nil) }
            if let known = previous.fileSHA256 {
                guard known == pin else { throw .checksumMismatch(path: path, expected: pin, actual: known) }
                return (previous.library, nil)
            }
        }

        let file = try PluginFile(path: path)
        let identity = file.identity
        if let previous, previous.identity == identity, let pin, previous.fileSHA256 == nil {
            // Loaded by path without this pin, and unchanged: reused when the file has its checksum.
            let actual = try file.sha256()
            guard actual == pin else { throw .checksumMismatch(path: path, expected: pin, actual: actual) }
            state.libraries[path]?.fileSHA256 = actual
            return (previous.library, nil)
        }

        // A name or inode glibc already holds, whose file changed since, would be answered
        // with the earlier mapping: such a file is loaded from a copy too.
        let glibcHoldsAnother = state.loadedByName[path].map { $0 != identity } ?? false
            || state.loadedInodes[identity.fileID].map { $0 != identity } ?? false
        guard pin != nil || previous != nil || glibcHoldsAnother else {
            try file.checkELFHeader()
            let library = try dlopenLibrary(path: path, loadFrom: path, loadedSHA256: nil, within: timeout) {
                state.loadedByName[path] = identity
                state.loadedInodes[identity.fileID] = identity
            }
            state.libraries[path] = Cached(library: library, identity: identity, fileSHA256: nil)
            return (library, nil)
        }

        let copy = try file.sealedCopy()
        var keepCopy = false
        defer { if !keepCopy { close(copy.fd) } }
        if let pin, copy.sha256 != pin { throw .checksumMismatch(path: path, expected: pin, actual: copy.sha256) }
        if let previous, previous.fileSHA256 == copy.sha256 {
            // Touched or rewritten with the same bytes: the library loaded is still the file's.
            state.libraries[path]?.identity = identity
            return (previous.library, nil)
        }
        let library = try dlopenLibrary(path: path, loadFrom: "/proc/self/fd/\(copy.fd)", loadedSHA256: copy.sha256, within: timeout) {
            keepCopy = true
            state.memfds.append(copy.fd)
        }
        state.libraries[path] = Cached(library: library, identity: identity, fileSHA256: copy.sha256)
        return (library, previous == nil ? nil : OpenNote(kind: .fileChanged, path: path))
    }

    /// dlopens `loadFrom` and reads the plugin entry; `loaded` runs once dlopen succeeded, as
    /// the library then stays loaded whatever follows.
    private static func dlopenLibrary(
        path: String, loadFrom: String, loadedSHA256: String?, within timeout: Duration, loaded: () -> Void
    ) throws(PluginLoadError) -> PluginLibrary {
        func failure(_ reason: String) -> PluginLoadError {
            .loadFailed(path: path, reason: loadFrom == path ? reason : "\(reason) (loading its in-memory copy)")
        }
        // Its constructors run in dlopen: one that never returns holds the C library's loader
        // lock for good, and no other library can load in this process (nor can it exit
        // normally: ``isLoaderStuck``).
        let label = PluginCrash.label(path)
        let opened = boundedCall(named: "paging-load", within: timeout) { () -> UnsafeSendable<(OpaquePointer?, String?)> in
            let handle = PluginCrash.calling(label) { dlopen(loadFrom, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE).map(OpaquePointer.init) }
            return UnsafeSendable((handle, handle == nil ? dlerror().map { String(cString: $0) } : nil))
        }
        guard let opened else {
            stuckLoading.store(true, ordering: .relaxed)
            throw .loadTimedOut(path: path, timeout: timeout)
        }
        guard let handle = opened.value.0.map(UnsafeMutableRawPointer.init) else {
            throw failure(opened.value.1 ?? "unknown error")
        }
        loaded()
        if let name = paging_unbound_function(handle) {
            throw failure("\(loadFrom): undefined symbol: \(String(cString: name)) (a function the library imports)")
        }
        guard let symbol = dlsym(handle, PAGING_PLUGIN_ENTRY_SYMBOL_NAME) else {
            throw .noEntrySymbol(path: path)
        }
        loadedFiles.withLock { $0[loadFrom] = path }
        paging_plugin_crash_register_library(symbol, UnsafePointer(bitPattern: label))
        let entryFunction = unsafeBitCast(symbol, to: paging_plugin_entry_fn.self)
        guard let entry = PluginCrash.calling(label, { entryFunction() }) else {
            throw .invalidEntry(path: path, reason: "paging_plugin_entry() returned NULL")
        }
        let (version, descriptors) = try readEntry(entry, path: path, within: timeout)
        restoringSIGCHLD(after: "its constructors or init()") { librarySink(.warning, path, $0) }
        return PluginLibrary(path: path, loadedFrom: loadFrom, loadedSHA256: loadedSHA256, entry: entry,
                             abiVersion: version, descriptors: descriptors)
    }

    static func fileError(_ path: String, _ code: Int32) -> PluginLoadError {
        code == ENOENT ? .fileNotFound(path: path) : .unreadable(path: path, reason: String(cString: strerror(code)))
    }

    /// Refuses anything but a regular file, naming what it is.
    static func checkType(_ info: stat, path: String) throws(PluginLoadError) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR: throw .notAFile(path: path)
        case S_IFIFO: throw .notARegularFile(path: path, kind: "a FIFO (named pipe)")
        case S_IFSOCK: throw .notARegularFile(path: path, kind: "a socket")
        case S_IFCHR: throw .notARegularFile(path: path, kind: "a character device")
        case S_IFBLK: throw .notARegularFile(path: path, kind: "a block device")
        default: throw .notARegularFile(path: path, kind: "a special file")
        }
    }

    /// The descriptor of plugin `id` of `kind`; with no id, the library's only plugin of that kind.
    /// Refused when it requires an extension this host lacks or `withheld` names
    /// (``PluginLimits/withheldExtensions``).
    public func descriptor(id: String?, kind: PluginKind, withholding withheld: Set<String> = []) throws(PluginLoadError) -> PluginDescriptor {
        if let id {
            let named = descriptors.indices.filter { descriptors[$0].id == id }
            guard let index = named.first else {
                throw .unknownPlugin(path: path, id: id, available: descriptors.map(\.id))
            }
            // Which of them the manifest means cannot be told: none is taken.
            guard named.count == 1 else {
                throw .invalidEntry(path: path, reason: "\(named.count) descriptors (\(named.map { "#\($0)" }.joined(separator: ", "))) have the id '\(id)' (a library's plugin ids must be unique)")
            }
            let descriptor = descriptors[index]
            guard descriptor.kind == kind else {
                throw .wrongKind(path: path, id: id, expected: kind, actual: descriptor.kind)
            }
            return try usable(descriptor, withholding: withheld)
        }
        let ofKind = descriptors.filter { $0.kind == kind }
        if ofKind.count == 1 { return try usable(ofKind[0], withholding: withheld) }
        if ofKind.isEmpty, let other = descriptors.first {
            throw .wrongKind(path: path, id: other.id, expected: kind, actual: other.kind)
        }
        if ofKind.isEmpty { throw .unknownPlugin(path: path, id: "(any \(kind))", available: []) }
        throw .ambiguousPlugin(path: path, kind: kind, available: ofKind.map(\.id))
    }

    /// `descriptor`, unless it needs an extension this host lacks or withholds.
    func usable(_ descriptor: PluginDescriptor, withholding withheld: Set<String>) throws(PluginLoadError) -> PluginDescriptor {
        if let missing = descriptor.missingExtension(withholding: withheld) {
            throw .missingExtension(path: path, id: descriptor.id, plugin: descriptor.abiVersion, host: .host, extension: missing)
        }
        return descriptor
    }
}

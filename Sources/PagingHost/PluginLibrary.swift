import CPaging
import Foundation
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
    public var missingExtension: String? { requiredExtensions.first { !HostExtensions.offers($0) } }
}

/// Why a plugin library or plugin could not be loaded. Every case names the file.
public enum PluginLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    case fileNotFound(path: String)
    case notAFile(path: String)
    case unreadable(path: String, reason: String)
    case notASharedObject(path: String, reason: String)
    case loadFailed(path: String, reason: String)
    case noEntrySymbol(path: String)
    case invalidEntry(path: String, reason: String)
    case abiMajorMismatch(path: String, library: PluginABIVersion, host: PluginABIVersion)
    case descriptorABIMismatch(path: String, id: String, plugin: PluginABIVersion, host: PluginABIVersion)
    case missingExtension(path: String, id: String, plugin: PluginABIVersion, host: PluginABIVersion, extension: String)
    case initFailed(path: String, status: PluginStatus, message: String)
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
        case .pluginNotFound(let name, let searched):
            "plugin '\(name)': lib\(name).so not found in \(searched.joined(separator: ", "))"
        }
    }
}

package let PAGING_PLUGIN_ENTRY_SYMBOL_NAME = "paging_plugin_entry"

/// A plugin library opened with dlopen: its entry, ABI version and plugin descriptors.
///
/// Libraries are opened with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE` and never closed:
/// unloading a Swift library breaks the host's later dynamic casts, and plugin instances may
/// outlive any one owner. Opening the same path again returns the same library.
///
/// # Thread safety
/// Immutable; safe from any thread.
public final class PluginLibrary: @unchecked Sendable {
    public let path: String
    public let abiVersion: PluginABIVersion
    public let descriptors: [PluginDescriptor]
    package let entry: UnsafePointer<paging_plugin_entry_t>
    /// Instances created and not yet destroyed: `deinit()` waits for none to be left.
    let liveInstances = Atomic<Int>(0)
    private let deinitialized = Atomic<Bool>(false)

    private static let opened = Locked<[String: PluginLibrary]>([:])

    /// Calls the `deinit()` of every library opened (once each), for a clean shutdown of the
    /// host: after every instance of it was destroyed. A library with instances left is skipped
    /// (they may still call it), and reported to ``librarySink``.
    public static func shutDown() {
        for library in opened.withLock({ Array($0.values) }) { library.deinitialize() }
    }

    private func deinitialize() {
        guard DeclaredSize(entry).holds(\.deinit), let finish = entry.pointee.deinit else { return }
        let live = liveInstances.load(ordering: .acquiring)
        guard live == 0 else {
            Self.librarySink(.debug, path, "deinit() not called: \(live) instance(s) not destroyed")
            return
        }
        guard !deinitialized.exchange(true, ordering: .acquiringAndReleasing) else { return }
        finish()
    }

    private init(path: String, entry: UnsafePointer<paging_plugin_entry_t>,
                 abiVersion: PluginABIVersion, descriptors: [PluginDescriptor]) {
        self.path = path
        self.entry = entry
        self.abiVersion = abiVersion
        self.descriptors = descriptors
    }

    /// Opens the library at `path` and reads its descriptors.
    public static func open(path: String) throws(PluginLoadError) -> PluginLibrary {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        if let library = opened.withLock({ $0[path] }) { return library }
        try checkFile(path)
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            throw .loadFailed(path: path, reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        guard let symbol = dlsym(handle, PAGING_PLUGIN_ENTRY_SYMBOL_NAME) else {
            throw .noEntrySymbol(path: path)
        }
        let entryFunction = unsafeBitCast(symbol, to: paging_plugin_entry_fn.self)
        guard let entry = entryFunction() else {
            throw .invalidEntry(path: path, reason: "paging_plugin_entry() returned NULL")
        }
        let (version, descriptors) = try readEntry(entry, path: path)
        let library = PluginLibrary(path: path, entry: entry, abiVersion: version, descriptors: descriptors)
        return opened.withLock { opened in
            if let existing = opened[path] { return existing }
            opened[path] = library
            return library
        }
    }

    /// The descriptor of plugin `id` of `kind`; with no id, the library's only plugin of that kind.
    public func descriptor(id: String?, kind: PluginKind) throws(PluginLoadError) -> PluginDescriptor {
        if let id {
            guard let descriptor = descriptors.first(where: { $0.id == id }) else {
                throw .unknownPlugin(path: path, id: id, available: descriptors.map(\.id))
            }
            guard descriptor.kind == kind else {
                throw .wrongKind(path: path, id: id, expected: kind, actual: descriptor.kind)
            }
            return try usable(descriptor)
        }
        let ofKind = descriptors.filter { $0.kind == kind }
        if ofKind.count == 1 { return try usable(ofKind[0]) }
        if ofKind.isEmpty, let other = descriptors.first {
            throw .wrongKind(path: path, id: other.id, expected: kind, actual: other.kind)
        }
        if ofKind.isEmpty { throw .unknownPlugin(path: path, id: "(any \(kind))", available: []) }
        throw .ambiguousPlugin(path: path, kind: kind, available: ofKind.map(\.id))
    }

    /// `descriptor`, unless it needs an extension this host lacks.
    private func usable(_ descriptor: PluginDescriptor) throws(PluginLoadError) -> PluginDescriptor {
        if let missing = descriptor.missingExtension {
            throw .missingExtension(path: path, id: descriptor.id, plugin: descriptor.abiVersion, host: .host, extension: missing)
        }
        return descriptor
    }

    /// Refuses what dlopen would fail on with a less clear message, or would not refuse at all.
    static func checkFile(_ path: String) throws(PluginLoadError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { throw .fileNotFound(path: path) }
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        if info.st_mode & S_IFMT == S_IFDIR { throw .notAFile(path: path) }
        guard let file = fopen(path, "rb") else {
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        defer { fclose(file) }
        var magic = [UInt8](repeating: 0, count: 4)
        let read = fread(&magic, 1, 4, file)
        guard read == 4, magic == [0x7F, 0x45, 0x4C, 0x46] else {
            throw .notASharedObject(path: path, reason: read < 4 ? "the file is too short" : "no ELF header")
        }
    }
}

import FoundationEssentials
import Glibc

/// Where plugin names are looked up: a name `foo` is the first `libfoo.so` in these folders.
public struct PluginSearchPath: Sendable {
    public var folders: [String]

    public init(folders: [String]) {
        self.folders = folders
    }

    /// The manifest's folder, then the folders of `PAGING_PLUGIN_PATH` (colon-separated), then
    /// the folder of the running executable (the built products folder, where `swift build`
    /// puts the shipped plugins).
    public static func standard(manifestFolder: String?) -> PluginSearchPath {
        var folders: [String] = []
        if let manifestFolder { folders.append(manifestFolder) }
        if let variable = ProcessInfo.processInfo.environment["PAGING_PLUGIN_PATH"] {
            folders += variable.split(separator: ":").map(String.init)
        }
        if let executableFolder = executableFolder() { folders.append(executableFolder) }
        var seen: Set<String> = []
        return PluginSearchPath(folders: folders.filter { seen.insert($0).inserted })
    }

    /// The library file for a manifest's `plugin` value: a path (it has a `/`) relative to
    /// `folder`, or a name looked up as `lib<name>.so` (or as given, when it ends in `.so`).
    public func resolve(_ plugin: String, relativeTo folder: String) throws(PluginLoadError) -> String {
        if plugin.contains("/") {
            return plugin.hasPrefix("/") ? plugin : URL(fileURLWithPath: folder).appendingPathComponent(plugin).standardizedFileURL.path
        }
        let file = plugin.hasSuffix(".so") ? plugin : "lib\(plugin).so"
        for candidate in folders.map({ URL(fileURLWithPath: $0).appendingPathComponent(file).path })
        where FileManager.default.fileExists(atPath: candidate) {
            return candidate
        }
        throw .pluginNotFound(name: plugin, searched: folders)
    }

    /// The folder of the running executable (/proc/self/exe): for `pager` and for tests, the
    /// built products folder.
    public static func executableFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return URL(fileURLWithPath: String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
            .deletingLastPathComponent().path
    }
}

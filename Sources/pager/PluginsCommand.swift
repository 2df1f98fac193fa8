import Foundation
import PagingHost

/// `pager plugins [DIR...]`: lists every plugin found, with its descriptor.
struct PluginsCommand {
    static let help = """
    usage: pager plugins [DIR...]

    Lists every plugin of every lib*.so in the folders (default: PAGING_PLUGIN_PATH and the
    built products folder), with its descriptor. Libraries that fail to load are listed with
    the reason.

    exit codes: 0 listed; 2 a folder does not exist
    """

    var folders: [String] = []

    init(_ arguments: [String]) throws {
        for argument in arguments {
            switch argument {
            case "--help", "-h":
                Output.line(Self.help)
                throw HelpShown()
            case _ where argument.hasPrefix("-"): throw UsageError("plugins: unknown option '\(argument)'\n\n\(Self.help)")
            default: folders.append(argument)
            }
        }
    }

    func run() throws -> Int32 {
        let folders = self.folders.isEmpty ? PluginSearchPath.standard(manifestFolder: nil).folders : self.folders
        var found = 0
        for folder in folders {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
                if self.folders.isEmpty { continue }
                throw UsageError("plugins: \(folder): no such folder")
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for file in files.sorted() where file.hasPrefix("lib") && file.hasSuffix(".so") {
                let path = URL(fileURLWithPath: folder).appendingPathComponent(file).path
                do {
                    let library = try PluginLibrary.open(path: path) { Output.error("warning: \($0)") }
                    for descriptor in library.descriptors {
                        found += 1
                        Output.line("\(descriptor.id)\t\(descriptor.kind)\t\(descriptor.version)\t\(path)\t\(descriptor.name): \(descriptor.description)"
                                    + (descriptor.isThreadSafe ? " [thread-safe]" : ""))
                    }
                } catch {
                    Output.error("\(error)")
                }
            }
        }
        Output.error("\(found) plugins")
        return ExitCode.success
    }
}

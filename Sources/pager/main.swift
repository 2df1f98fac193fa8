// pager: runs pipelines of paging plugins described in manifests.
import Foundation
import PagingHost

let arguments = Array(CommandLine.arguments.dropFirst())
// The child process of an isolated plugin: serves it to the parent over fd 3.
if arguments.first == "__isolate" { await IsolationServer.run(Array(arguments.dropFirst())) }
PluginIsolation.executable = (PluginSearchPath.executableFolder() ?? ".") + "/" + CheckCommand.executableName()
PluginLibrary.librarySink = Output.pluginLog(minimum: .info)
// A plugin that calls exit() while it is loaded or created is bad input, said so: not a quiet 0.
PluginLibrary.reportExitsWhileLoading(status: ExitCode.badInput)
let code = await PagerCommand.main(arguments)
// Every command has dropped its plugin instances by now: the libraries may release what their
// init() prepared.
PluginLibrary.shutDown()
exit(code)

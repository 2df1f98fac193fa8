// pager: runs pipelines of paging plugins described in manifests.
import Foundation
import PagingHost

let arguments = Array(CommandLine.arguments.dropFirst())
PluginLibrary.librarySink = Output.pluginLog(minimum: .info)
let code = await PagerCommand.main(arguments)
// Every command has dropped its plugin instances by now: the libraries may release what their
// init() prepared.
PluginLibrary.shutDown()
exit(code)

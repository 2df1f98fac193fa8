// pager: runs pipelines of paging plugins described in manifests.
import Glibc
import Dispatch
import PagingHost

let arguments = Array(CommandLine.arguments.dropFirst())
// The child process of an isolated plugin, or of a check, splits before any thread starts
// into a reaper of what the plugin's processes orphan and the process that does the work.
if arguments.first == "__isolate" { IsolationServer.startReaper(Array(arguments.dropFirst())) }
if arguments.first == "check", ["__one", "__list"].contains(arguments.dropFirst().first) { CheckCommand.startReaper() }
// The command runs off the main actor; the main thread only serves the main queue. pager links
// FoundationEssentials only, and once a plugin brings Foundation in, the main queue may stop
// being served (seen with a Swift plugin answering intercepts from a Dispatch timer: the
// command never resumed on the main actor), so nothing of pager's waits to resume there.
// A plugin that crashes in this process is named (an isolated plugin's crash is its parent's to
// say; a check's, pager check's).
if !["__isolate", "check"].contains(arguments.first ?? "") {
    PluginLibrary.nameCrashes(program: "pager", advice: #"a plugin that crashes ends the process that loaded it; to survive its crashes, run it in a child process of its own ("isolation": "process" in the manifest, or --isolate-all)"#)
}
Task.detached {
    // The child process of an isolated plugin: serves it to the parent over fd 3.
    if arguments.first == "__isolate" { await IsolationServer.run() }
    PluginIsolation.executable = (PluginSearchPath.executableFolder() ?? ".") + "/" + CheckCommand.executableName()
    PluginLibrary.librarySink = Output.pluginLog(minimum: .info)
    // A plugin that calls exit() while it is loaded or created is bad input, said so: not a quiet 0.
    PluginLibrary.reportExits(status: ExitCode.badInput)
    let code = await PagerCommand.main(arguments)
    // Every command has dropped its plugin instances by now: the libraries may release what
    // their init() prepared.
    PluginLibrary.shutDown()
    // A library stuck in its constructors holds the loader's lock, which exit() would wait for;
    // a destroy() left running would run under the libraries' destructors (pager writes its
    // output unbuffered: nothing is lost).
    if PluginLibrary.isLoaderStuck || PluginLibrary.isDestroyLeftRunning { _exit(code) }
    PluginLibrary.exitHost(code)
}
dispatchMain()

// paging-bench: `swift build -c release && swift run -c release paging-bench` (the plugin
// libraries must be built: `swift run` builds only this executable). Arguments: row numbers to
// run only those (e.g. `paging-bench 1,4`).
import Foundation

exit(await runBench())

// pager: runs pipelines of paging plugins described in manifests.
import Foundation
import PagingHost

let arguments = Array(CommandLine.arguments.dropFirst())
let code = await PagerCommand.main(arguments)
exit(code)

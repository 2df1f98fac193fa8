import Foundation
import Paging
import PagingHost
import Testing

/// The ABI 1.1 extensions through real dlopen of Tests/Fixtures/plugins/interceptor_work.c.
@Suite("ABI 1.1 extensions: transforms, deferred intercepts, outcomes, retry hints, sized keys")
struct InterceptorExtensionTests {
    let log = LogRecorder()

    func library() async throws -> PluginLibrary {
        try PluginLibrary.open(path: try await fixturePlugin("interceptor_work"))
    }

    func interceptor(_ id: String, mode: String? = nil, _ config: [(String, JSONValue)] = [],
                     limits: PluginLimits = PluginLimits()) async throws -> LoadedInterceptor {
        try await library().makeInterceptor(id: id, config: .object((mode.map { [("mode", JSONValue.string($0))] } ?? []) + config),
                                      sink: log.sink, limits: limits)
    }

    func offsets(_ config: [(String, JSONValue)] = []) async throws -> LoadedSource {
        try await library().makeSource(id: "offsets", config: .object(config), sink: log.sink)
    }

    func load(_ interceptors: [LoadedInterceptor], pageSize: Int = 4, retry: RetryPolicy = .none,
              source: LoadedSource? = nil) async throws -> PluginPage {
        let source = if let source { source } else { try await offsets() }
        let pager = Pager(source: source, interceptors: interceptors)
        return try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: pageSize, retry: retry)))
    }

    /// Found by a newcomer: a transform whose table's struct_size was never set ran without
    /// its transform (get_extension unread): the items it drops went out, exit 0, with only a
    /// warning. A plugin that requires paging.page-transform/1 is refused then.
    @Test func aTransformWhoseStructSizeIsZero_isRefused() async throws {
        await #expect {
            _ = try await interceptor("transformer", mode: "keep-odd", [("struct_size_zero", .bool(true))])
        } throws: { error in
            "\(error)".contains("interceptor 'transformer' requires paging.page-transform/1, but its table's struct_size (0) leaves its "
                                + "get_extension unread, so its transform would never be called: set it to sizeof(paging_interceptor_t)")
        }
    }

    /// An interceptor that asks for another key (`out_set_key`) gets the source's key chain
    /// for it: the page names its neighbours (it named none, and a run ended there, exit 0).
    @Test func aRewrittenKey_getsTheSourcesKeyChain() async throws {
        let page = try await load([try await interceptor("listener", mode: "key-1")])
        #expect(page.key == "1")
        #expect(page.values.texts.first == #"{"n":1}"#)
        #expect(page.nextKey == "5")
    }

    // MARK: paging.page-transform/1

    @Test func transform_keepsChosenItems_withoutCopies_andAttachesMetadata() async throws {
        let page = try await load([try await interceptor("transformer", mode: "keep-odd")])
        #expect(page.values.texts == [#"{"n":1}"#, #"{"n":3}"#])
        #expect(page.metadata == ["kept": "2"])
        #expect(page.nextKey == "4")
    }

    @Test func transform_addsItems_andSetsKeys() async throws {
        let added = try await load([try await interceptor("transformer", mode: "add")], pageSize: 2)
        #expect(added.values.texts == [#"{"n":0}"#, #"{"n":1}"#, #"{"added":true}"#])
        let rekeyed = try await load([try await interceptor("transformer", mode: "next-key")], pageSize: 2)
        #expect(rekeyed.values.count == 2 && rekeyed.nextKey == "zz")
    }

    /// An observer before the transformer sees the transformed page, metadata included.
    @Test func transformedPage_reachesTheInterceptorsBeforeIt() async throws {
        let first = try await interceptor("transformer", mode: "keep")
        let page = try await load([first, try await interceptor("transformer", mode: "keep-odd")])
        #expect(page.values.count == 2 && page.metadata["kept"] == "2")
    }

    @Test func transform_failureOrBadIndex_failsTheLoad_namingThePlugin() async throws {
        let failed = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("transformer", mode: "fail")])
        }
        #expect(failed?.status == .transient && failed?.message == "transform refused")
        #expect(failed?.plugin.hasPrefix("transformer (") == true)
        let misused = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("transformer", mode: "bad-index")])
        }
        #expect(misused?.status == .invalidArgument)
        #expect(misused?.message == "keep_item: item index 999, the page has 4 items", "\(String(describing: misused))")
        // Found by a probe: FAIL after the refusal, as the guide says to, lost its reason to an
        // internal "transform returned FAIL without fail()".
        let failedAfter = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("transformer", mode: "bad-index-fail")])
        }
        #expect(failedAfter?.status == .invalidArgument)
        #expect(failedAfter?.message == "keep_item: item index 999, the page has 4 items", "\(String(describing: failedAfter))")
    }

    /// Found by a probe: a refused builder call (an item that is not JSON) failed the load even
    /// when transform() then returned KEEP, which drops whatever was set: the page goes on.
    @Test func transform_keepAfterARefusedCall_passesThePageOn() async throws {
        let page = try await load([try await interceptor("transformer", mode: "bad-item-keep")])
        #expect(page.values.count == 4)
        #expect(log.contains("bad item: \(PluginStatus.invalidArgument.rawValue)"), "\(log.messages)")
    }

    /// A transform could set metadata without bound (300 entries of a megabyte grew a page of
    /// at most 1 MiB to 300 MiB): past 1,024 entries, or 1 MiB of names and values, set_metadata
    /// is refused and the load fails naming it.
    @Test func transform_metadataPastItsLimits_isRefused() async throws {
        let flooded = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("transformer", mode: "meta-flood")])
        }
        #expect(flooded?.status == .invalidArgument)
        #expect(flooded?.message == "set_metadata: a metadata entry past the most there may be, 1024", "\(String(describing: flooded))")
        #expect(log.contains("metadata refused at 1024: \(PluginStatus.invalidArgument.rawValue)"), "\(log.messages)")
        #expect(log.contains("big metadata: \(PluginStatus.invalidArgument.rawValue)"), "\(log.messages)")
    }

    // MARK: paging.async-intercept/1

    @Test func deferredIntercept_answeredFromAnotherThread_proceedsOrCompletes() async throws {
        let proceeded = try await load([try await interceptor("deferring", mode: "thread")])
        #expect(proceeded.values.count == 4)
        let completed = try await load([try await interceptor("deferring", mode: "complete")])
        #expect(completed.values.texts == [#"{"deferred":true}"#])
        let inline = try await load([try await interceptor("deferring", mode: "inline")])
        #expect(inline.values.count == 4)
    }

    /// Found by a probe: an answer that completed with a page the host refused (an item that
    /// is not JSON) failed its load, but its resume said PAGING_OK, and nothing was logged, as
    /// the header says there would be.
    @Test func deferredIntercept_completedWithARefusedItem_failsItsLoad_andResumeSaysSo() async throws {
        let deferring = try await interceptor("deferring", mode: "complete-bad")
        let error = await #expect(throws: PluginError.self) { try await load([deferring]) }
        #expect(error?.status == .invalidArgument, "\(String(describing: error))")
        #expect(await log.waitFor("bad complete resume: \(PluginStatus.invalidArgument.rawValue)"), "\(log.messages)")
        #expect(log.contains("is not valid JSON"), "\(log.messages)")
        #expect(log.contains("its load fails"), "\(log.messages)")
    }

    /// An answer that fails its load after a refused call building the page (as the guide
    /// says: the refusal failed the load already) fails it with that refusal, not an internal
    /// "FAIL without out_fail".
    @Test func deferredIntercept_failingAfterARefusedItem_failsWithTheRefusal() async throws {
        let error = await #expect(throws: PluginError.self) { try await load([try await interceptor("deferring", mode: "fail-bad")]) }
        #expect(error?.status == .invalidArgument, "\(String(describing: error))")
        #expect(error?.message.contains("out_add_item: item 0 is not valid JSON") == true, "\(String(describing: error))")
    }

    /// Many loads wait at once; each gets its own answer.
    @Test func deferredIntercepts_manyAtOnce_eachAnswered() async throws {
        let pager = Pager(source: try await offsets([("count", .int(10_000))]), interceptors: [try await interceptor("deferring", mode: "thread")],
                          deduplication: .disabled)
        let firsts = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let page = try await pager.load(pager.request(.append, key: PluginKey("\(index * 4)"), params: params(pageSize: 4)))
                    return page.values[0].text
                }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(firsts.count == 200)
    }

    @Test func secondResume_isRefused_andLogged() async throws {
        _ = try await load([try await interceptor("deferring", mode: "twice")])
        #expect(await log.waitFor("second resume: 8"), "\(log.messages)") // PAGING_ERR_INVALID_ARGUMENT
        #expect(log.contains("refused resume for deferred intercept id") && log.contains("it was answered already, or is not this instance's"), "\(log.messages)")
    }

    /// An id defer() never gave is said so (it read "unknown or finished", as a second answer).
    @Test func resumeOfAnIdNeverIssued_isRefused_sayingSo() async throws {
        let page = try await load([try await interceptor("deferring", mode: "bogus-id")])
        #expect(page.values.count == 4)
        #expect(await log.waitFor("bogus resume: 8"), "\(log.messages)") // PAGING_ERR_INVALID_ARGUMENT
        #expect(log.contains("defer never issued it"), "\(log.messages)")
    }

    @Test func pendingWithoutDefer_failsTheLoad_saying() async throws {
        let error = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("deferring", mode: "no-defer")])
        }
        #expect(error?.message.contains("PAGING_INTERCEPT_PENDING without calling defer()") == true)
    }

    @Test func deferredIntercept_neverAnswered_timesOut_andThePluginHearsCancel() async throws {
        let limits = PluginLimits(fetchTimeout: .milliseconds(100))
        // Kept alive until it hears: dropped at once, it could be destroyed before its cancel
        // came (the host calls none after destroy()), and the test failed 1 run in 6.
        let deferring = try await interceptor("deferring", mode: "never", limits: limits)
        let error = await #expect(throws: PluginError.self) { try await load([deferring]) }
        #expect(error?.status == .timeout)
        #expect(error?.message == "the deferred intercept was not answered within 0.1 seconds")
        #expect(await log.waitFor("cancel "))
        withExtendedLifetime(deferring) {}
    }

    /// An answer still running at the fetch timeout held the load until it returned (one that
    /// never returned, for ever): the load fails at the timeout, and the resume says so when
    /// the answer returns, its result dropped (no cancel() meanwhile: it would race the answer).
    @Test func deferredIntercept_whoseAnswerIsStillRunning_timesOut() async throws {
        let limits = PluginLimits(fetchTimeout: .milliseconds(300))
        let proceed = scratchFolder() + "/proceed"
        let deferring = try await interceptor("deferring", mode: "slow-answer", [("resume_file", .string(proceed))], limits: limits)
        defer { withExtendedLifetime(deferring) {} }
        let start = ContinuousClock.now
        let error = await #expect(throws: PluginError.self) { try await load([deferring]) }
        #expect(error?.status == .timeout, "\(String(describing: error))")
        // Well before the answer's 10 minutes (the timeout's task may wait for a thread of the
        // pool the tests share: once 68 s, on a machine running two suites).
        #expect(ContinuousClock.now - start < .seconds(300))
        _ = FileManager.default.createFile(atPath: proceed, contents: nil)
        #expect(await log.waitFor("slow answer resume: 3"), "the resume says PAGING_ERR_TIMEOUT: \(log.messages)")
        #expect(!log.contains("cancel "), "\(log.messages)")
    }

    /// Found by a probe: destroy() was called while a deferred intercept's answer still ran
    /// (inside the plugin's resume, on its thread), though the header promises destroy() is
    /// never concurrent with anything: a plugin freeing its state there had it freed under the
    /// answer. destroy() now waits for the answer (said after a second), then runs.
    @Test func destroy_waitsForAnAnswerStillRunning() async throws {
        let limits = PluginLimits(fetchTimeout: .milliseconds(300))
        let proceed = scratchFolder() + "/proceed"
        let deferring = try await interceptor("deferring", mode: "joined", [("resume_file", .string(proceed))], limits: limits)
        let error = await #expect(throws: PluginError.self) { try await load([deferring]) }
        #expect(error?.status == .timeout, "\(String(describing: error))")
        // destroy() blocks its thread while it waits: a thread of Dispatch's, not of the pool
        // every test's tasks share.
        let destroyed = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            deferring.destroy()
            destroyed.signal()
        }
        #expect(await log.waitFor("destroy() could not be called within 1.0 seconds: a call to the plugin has not returned"), "\(log.messages)")
        #expect(!log.messages.contains("destroy"), "\(log.messages)")
        _ = FileManager.default.createFile(atPath: proceed, contents: nil)
        let returned = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: destroyed.wait(timeout: .now() + 60) == .success) }
        }
        #expect(returned, "destroy() never returned")
        #expect(await log.waitFor("joined resume: "), "\(log.messages)")
        // The plugin's destroy() runs on the host's thread once the answer returned, and says so
        // as it starts: waited for (looked at as the resume returned, it was not there yet once).
        #expect(await eventually { log.messages.contains("destroy") }, "\(log.messages)")
        let answered = log.messages.firstIndex(of: "answer returns"), destroy = log.messages.firstIndex(of: "destroy")
        #expect(answered != nil && destroy != nil && answered! < destroy!, "\(log.messages)")
        // Its resume says the host ended the intercept (its load timed out).
        #expect(log.contains("joined resume: 3"), "\(log.messages)")
    }

    @Test func deferredIntercept_cancelledLoad_endsAtOnce_andThePluginHearsCancel() async throws {
        let pager = Pager(source: try await offsets(), interceptors: [try await interceptor("deferring", mode: "never")])
        let task = Task { try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 4))) }
        #expect(await log.waitFor("deferred "))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(await log.waitFor("cancel "), "\(log.messages)")
    }

    /// A call that defers after its call timeout passed: no load waits for its answer, so the
    /// host drops it and tells the plugin (which could otherwise hold a slot for ever).
    @Test func deferredAfterTheCallTimeout_isDropped_andThePluginHearsCancel() async throws {
        let limits = PluginLimits(callTimeout: .milliseconds(50))
        let proceed = scratchFolder() + "/proceed"
        let deferring = try await interceptor("deferring", mode: "slow", [("resume_file", .string(proceed))], limits: limits)
        defer { withExtendedLifetime(deferring) {} }
        let error = await #expect(throws: PluginError.self) { try await load([deferring]) }
        #expect(error?.status == .timeout)
        // Only now does the call go on, and defer.
        _ = FileManager.default.createFile(atPath: proceed, contents: nil)
        #expect(await log.waitFor("deferred "))
        #expect(await log.waitFor("cancel "), "\(log.messages)")
    }

    /// Deferred, then answered in the call after all: the load goes on, the plugin hears its id
    /// is done with.
    @Test func deferredThenAnsweredAtOnce_proceeds_andThePluginHearsCancel() async throws {
        let deferring = try await interceptor("deferring", mode: "sync")
        let page = try await load([deferring])
        #expect(page.values.count == 4)
        #expect(await log.waitFor("cancel "))
        withExtendedLifetime(deferring) {}
    }

    /// Found by a probe: deferred, resumed within the call (resume() answered PAGING_OK: "its
    /// result was taken"), then PROCEED returned: the answer was dropped, the request went on,
    /// and cancel() heard the id. The answer given stands, and the code returned is warned of.
    @Test func resumedWithinTheCall_thenAnotherCodeReturned_theAnswerStands() async throws {
        let deferring = try await interceptor("deferring", mode: "inline-then-proceed")
        let page = try await load([deferring])
        #expect(page.values.texts == [#"{"deferred":true}"#])
        #expect(log.contains("inline resume: 0"), "\(log.messages)")
        #expect(log.contains("intercept returned 0, not PAGING_INTERCEPT_PENDING, after resume() had answered its deferred intercept: the answer stands"), "\(log.messages)")
        #expect(!log.contains("cancel "), "\(log.messages)")
        withExtendedLifetime(deferring) {}
    }

    @Test func anAnswerThatDefersAgain_failsTheLoad_saying() async throws {
        let error = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("deferring", mode: "redefer")])
        }
        #expect(error?.status == .invalidArgument)
        #expect(error?.message.contains("defer: within the answer of a deferred intercept, which cannot be deferred again") == true,
                "\(String(describing: error))")
        // resume() says the answer was refused (it said PAGING_OK, and the plugin could not tell).
        #expect(await log.waitFor("redefer resume: 8"), "\(log.messages)") // PAGING_ERR_INVALID_ARGUMENT
        #expect(log.contains("its load fails"), "\(log.messages)")
    }

    /// A plugin whose timer fires after its instance was destroyed: the resume is answered
    /// PAGING_ERR_CANCELLED, not refused as misuse.
    @Test func resumeAfterDestroy_isCancelled_notMisuse() async throws {
        let resume = scratchFolder() + "/resume"
        let deferring = try await interceptor("deferring", mode: "late", [("resume_file", .string(resume))])
        let pager = Pager(source: try await offsets(), interceptors: [deferring])
        let task = Task { try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 4))) }
        #expect(await log.waitFor("deferred "))
        deferring.destroy()
        await #expect(throws: PluginError.self) { try await task.value }
        // Only now does the plugin's thread resume (its log line, past destroy, is dropped).
        _ = FileManager.default.createFile(atPath: resume, contents: nil)
        #expect(await eventually { (try? String(contentsOfFile: resume + ".status", encoding: .utf8)) == "1" }) // PAGING_ERR_CANCELLED
        #expect(await log.waitFor("log called after destroy() returned: ignored"), "\(log.messages)")
        #expect(!log.contains("refused resume for deferred intercept id"))
    }

    /// A key chain that fails fails the fetch of its key, saying so: the page came without its
    /// neighbours' keys, and paging ended there with a warning only.
    @Test func aFailedKeyChain_failsTheLoad_notPagingsEnd() async throws {
        let source = try await offsets([("chain_fails", .bool(true))])
        let error = await #expect(throws: PluginError.self) { try await load([], source: source) }
        #expect(error?.status == .transient)
        #expect(error?.message.contains("key_chain(0) failed: transient; the page's neighbours are unknown") == true, "\(String(describing: error))")
    }

    /// A key longer than 1 MiB is refused, naming its length: a source's 200 MB key cost the
    /// host a gigabyte as it was copied along. One just under goes.
    @Test func aKeyOverAMebibyte_isRefused() async throws {
        let fits = try await offsets([("key_padding", .int(1_000_000))])
        let page = try await load([], source: fits)
        #expect(page.nextKey?.bytes.count == 1_000_002)
        let source = try await offsets([("key_padding", .int(1_100_000))])
        let error = await #expect(throws: PluginError.self) { try await load([], source: source) }
        #expect(error?.message.contains("a key of 1100002 bytes (at most 1048576)") == true, "\(String(describing: error))")
    }

    /// A param name that is not UTF-8 (it was taken as another name, U+FFFD in it), or an
    /// empty one, is refused, and the load fails as misuse.
    @Test(arguments: [("param-not-utf8", "a param name or value that is not valid UTF-8"), ("param-no-name", "a param with an empty name")])
    func aParamNameThatIsNoName_isRefused(mode: String, reason: String) async throws {
        let error = await #expect(throws: PluginError.self) { try await load([try await interceptor("listener", mode: mode)]) }
        #expect(log.contains("set param: 8"), "\(log.messages)")
        #expect(error?.message.contains(reason) == true, "\(String(describing: error))")
    }

    /// An interceptor's rewrite of the request's key is held to the same 1 MiB (it went
    /// through, 200 MB too): refused, named, and the load fails as misuse; 1 MiB goes.
    @Test func aRewrittenKeyOverAMebibyte_isRefused() async throws {
        // The source cannot read a key of a million digits: the rewrite itself went through.
        _ = try? await load([try await interceptor("listener", mode: "key-\(1 << 20)")])
        #expect(log.contains("set key: 0"), "\(log.messages)")
        let error = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("listener", mode: "key-\((1 << 20) + 1)")])
        }
        #expect(log.contains("set key: 8"), "\(log.messages)") // PAGING_ERR_INVALID_ARGUMENT
        #expect(error?.message.contains("a key of 1048577 bytes (at most 1048576)") == true, "\(String(describing: error))")
    }


    /// Found by a probe: a rewritten page size of 4,294,967,295 went through to the source, whose
    /// page the host could never take (max_items_per_page); refused, named, as 0 is.
    @Test func aRewrittenPageSizePastMaxItemsPerPage_isRefused() async throws {
        _ = try await load([try await interceptor("listener", mode: "size-100000")])
        #expect(log.contains("set size: 0"), "\(log.messages)")
        let error = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("listener", mode: "size-4294967295")])
        }
        #expect(log.contains("set size: 8"), "\(log.messages)") // PAGING_ERR_INVALID_ARGUMENT
        #expect(error?.message.contains("a page size of 4294967295, more than max_items_per_page (100000)") == true, "\(String(describing: error))")
    }

    @Test func failedLoad_isHeardByAnInterceptorThatLetItProceed() async throws {
        let source = try await offsets([("fail_times", .int(1)), ("retry_after_ms", .int(1))])
        await #expect(throws: PluginError.self) {
            try await load([try await interceptor("listener")], source: source)
        }
        #expect(log.contains("failed 2 offsets ("), "\(log.messages)") // PAGING_ERR_TRANSIENT
        #expect(log.contains(": transient: busy"))
    }

    /// A failure whose retry hint is longer than the retry policy waits fails the load at
    /// once: the interceptor hears it as transient, as it was (it heard INTERNAL).
    @Test func failedLoad_withAHintPastTheBackoff_isHeardAsTransient() async throws {
        let source = try await offsets([("fail_times", .int(1)), ("retry_after_ms", .int(60_000))])
        let retry = RetryPolicy(maxRetries: 3, backoff: .init(initial: .zero, maximum: .seconds(1)))
        await #expect(throws: PagingError.self) {
            try await load([try await interceptor("listener")], retry: retry, source: source)
        }
        #expect(log.contains("failed 2 offsets ("), "\(log.messages)") // PAGING_ERR_TRANSIENT
    }

    // MARK: paging.retry-hint/1

    @Test func interceptorRetryHint_isWaitedFor_thenTheLoadSucceeds() async throws {
        let hinting = try await interceptor("hinting", [("retry_after_ms", .int(150))])
        let clock = ContinuousClock()
        let started = clock.now
        let page = try await load([hinting], retry: RetryPolicy(maxRetries: 2, backoff: .immediate))
        #expect(page.values.count == 4)
        #expect(clock.now - started >= .milliseconds(150))
    }

    /// The hint is said as people read it: UINT64_MAX ms (-1 here) read "9.223372036854776e+15 seconds".
    @Test(arguments: [(Int64(60_000), "60 s"), (-1, "more than a year")])
    func fetchRetryHint_beyondTheLongestBackoff_failsAtOnce_withTheHint(milliseconds: Int64, said: String) async throws {
        let source = try await offsets([("fail_times", .int(1)), ("retry_after_ms", .int(milliseconds))])
        let retry = RetryPolicy(maxRetries: 3, backoff: .init(initial: .zero, maximum: .seconds(5)))
        let error = await #expect(throws: PagingError.self) {
            try await load([], retry: retry, source: source)
        }
        #expect("\(error!)".contains(": transient: busy (retry after \(said)) (it says to retry after \(said), longer than the retry policy's longest wait, 5 s)"),
                "\(error!)")
    }

    @Test func noRetryPolicy_leavesTheHintOnTheError() async throws {
        let error = await #expect(throws: PluginError.self) {
            try await load([try await interceptor("hinting", [("retry_after_ms", .int(2_500))])])
        }
        #expect(error?.retryAfter == .milliseconds(2_500))
    }

    // MARK: paging.sized-key-chain/1

    @Test func sizedKeyChain_chainsOffsetsByThePageSize() async throws {
        let source = try await offsets([("count", .int(25))])
        let manager = PaginationManager(source: source, pageSize: 10)
        await manager.refresh().value
        while !manager.output.appendState.isEndReached {
            await manager.append().value
            #expect(manager.output.appendState.error == nil)
        }
        #expect(manager.output.values.map(\.text) == (0..<25).map { #"{"n":\#($0)}"# })
    }
}

import CPaging
import FoundationEssentials
import Synchronization

/// An intercept whose answer the plugin deferred (`paging.async-intercept/1`), between `defer`
/// and its answer.
struct PendingIntercept: Sendable {
    var answer: DeferredAnswer?
    /// The plugin's `answer` callback runs (outside the lock); a second `resume` is refused.
    var answering = false
    var waiter: CheckedContinuation<DeferredAnswer, Never>?
}

/// What `resume` needs of the interceptor an instance is: its calls (destroy() waits for an
/// `answer` running) and whether it sees pages (``InterceptOut/refusal(answering:observes:)``).
struct AnswerContext: Sendable {
    let calls: SerializedCalls
    let observes: Bool
}

/// How a deferred intercept ended: the plugin answered (with the result code and what it set),
/// or the host ended it (cancelled, timed out, destroyed).
enum DeferredAnswer: Sendable {
    case answered(UInt32, InterceptOut)
    case ended(PluginStatus, String)
}

extension PluginInstance {
    /// The ids of fetches and deferred intercepts: one sequence, so that an id names one call.
    static let nextCallID = Atomic<UInt64>(1)

    /// Registers a deferred intercept and returns its id.
    func deferIntercept() -> UInt64 {
        let id = Self.nextCallID.add(1, ordering: .relaxed).oldValue
        intercepts.withLock { $0[id] = PendingIntercept() }
        return id
    }

    /// The plugin's `resume`: runs `answer` with a fresh result builder on this thread and hands
    /// what it built to the load waiting for it.
    func resumeIntercept(
        _ id: UInt64, _ answer: (@convention(c) (UnsafeMutableRawPointer?, OpaquePointer?) -> UInt32)?,
        _ context: UnsafeMutableRawPointer?
    ) -> paging_status_t {
        guard let answer else {
            log(.error, "resume: a NULL answer function for deferred intercept id \(id); refused")
            return PAGING_ERR_INVALID_ARGUMENT
        }
        let claimed = intercepts.withLock { intercepts -> Bool in
            guard let pending = intercepts[id], pending.answer == nil, !pending.answering else { return false }
            intercepts[id]?.answering = true
            return true
        }
        guard claimed else {
            if let status = abandoned.withLock({ $0.removeValue(forKey: id) }) {
                log(.debug, "resume for deferred intercept id \(id), which the host already ended (\(status))")
                return status.rawValue
            }
            // After destroy(), a plugin's timer may still fire: expected, not misuse.
            if destroyed.load(ordering: .acquiring) { return PAGING_ERR_CANCELLED }
            // Ids are one sequence: one past it was never issued (by defer, to any instance).
            let never = id == 0 || id >= Self.nextCallID.load(ordering: .relaxed)
            log(.error, "refused resume for deferred intercept id \(id): "
                + (never ? "defer never issued it" : "it was answered already, or is not this instance's"))
            return PAGING_ERR_INVALID_ARGUMENT
        }
        var out = InterceptOut(instance: self)
        out.isAnswer = true
        let interceptor = answering.withLock { $0 }
        let ran = out.withHandle(CallHandle.token(for: self)) { handle in
            interceptor.map { $0.calls.runFromPlugin { answer(context, handle) } } ?? answer(context, handle)
        }
        // destroy() began: the answer is not called (the plugin's state may be going).
        guard let code = ran else {
            _ = endIntercept(id, .cancelled, "the interceptor was destroyed")
            return PAGING_ERR_CANCELLED
        }
        if code == PAGING_INTERCEPT_PENDING, out.misuse == nil {
            out.misuse = "resume: the answer returned PAGING_INTERCEPT_PENDING"
        }
        let refusal = out.refusal(answering: code, observes: interceptor?.observes ?? false)
        guard finishIntercept(id, .answered(code, out)) else {
            // The host ended it while `answer` ran (its load timed out or was cancelled).
            return abandoned.withLock { $0.removeValue(forKey: id) }?.rawValue ?? PAGING_ERR_CANCELLED
        }
        // Taken, and refused: the load fails with the reason (resume said OK, and the plugin
        // could not tell).
        if let refusal {
            log(.error, "\(refusal) (deferred intercept id \(id)): its load fails")
            return PAGING_ERR_INVALID_ARGUMENT
        }
        return PAGING_OK
    }

    /// How ``endIntercept(_:_:_:)`` left a deferred intercept.
    enum Ending {
        /// Ended: the plugin is told (its `cancel`).
        case ended
        /// Ended while the plugin's `answer` ran: its `resume` says so when `answer` returns (a
        /// `cancel` meanwhile would race with the answer for the plugin's state).
        case endedWhileAnswering
        /// Answered or ended before.
        case finished
    }

    /// Ends a deferred intercept on the host's side: an answer still running when the load
    /// times out or is cancelled is not waited for (one that never returned held the load, and
    /// `pager run`, for ever).
    func endIntercept(_ id: UInt64, _ status: PluginStatus, _ message: String) -> Ending {
        let ending = DeferredAnswer.ended(status, message)
        let (outcome, waiter) = intercepts.withLock { intercepts -> (Ending, CheckedContinuation<DeferredAnswer, Never>?) in
            guard let pending = intercepts[id], pending.answer == nil else { return (.finished, nil) }
            // Before the entry ends, so that a resume arriving meanwhile (or ending) finds why.
            rememberEnded(id, status)
            let outcome = pending.answering ? Ending.endedWhileAnswering : .ended
            if let waiter = pending.waiter {
                intercepts[id] = nil
                return (outcome, waiter)
            }
            if pending.answering {
                intercepts[id] = nil
                return (outcome, nil)
            }
            intercepts[id]?.answer = ending
            return (outcome, nil)
        }
        waiter?.resume(returning: ending)
        return outcome
    }

    /// Hands `answer` to the waiting load, or keeps it until the load waits; false when the
    /// host ended the intercept meanwhile (the answer is dropped).
    private func finishIntercept(_ id: UInt64, _ answer: DeferredAnswer) -> Bool {
        let (taken, waiter) = intercepts.withLock { intercepts -> (Bool, CheckedContinuation<DeferredAnswer, Never>?) in
            guard intercepts[id] != nil else { return (false, nil) }
            if let waiter = intercepts[id]?.waiter {
                intercepts[id] = nil
                return (true, waiter)
            }
            intercepts[id]?.answer = answer
            intercepts[id]?.answering = false
            return (true, nil)
        }
        waiter?.resume(returning: answer)
        return taken
    }

    /// Waits for the answer of deferred intercept `id`.
    func answer(of id: UInt64) async -> DeferredAnswer {
        await withCheckedContinuation { continuation in
            let ready = intercepts.withLock { intercepts -> DeferredAnswer? in
                guard let pending = intercepts[id] else { return .ended(.cancelled, "the interceptor was destroyed") }
                guard let answer = pending.answer else {
                    intercepts[id]?.waiter = continuation
                    return nil
                }
                intercepts[id] = nil
                return answer
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Settles, under one lock, a deferred intercept no load will wait for (its intercept()
    /// returned another code than PENDING after all, or its call timed out or misused the host):
    /// returns the answer `resume` gave it meanwhile when `takingAnswer` (it stands: resume said
    /// PAGING_OK), else drops it, and a later `resume` returns `status`. `tellPlugin` is whether
    /// the plugin is to hear it ended (its `cancel`): not when it was answered or ended before,
    /// nor while a `resume` runs its answer (the `cancel` would race with it).
    func settleIntercept(_ id: UInt64, _ status: PluginStatus, takingAnswer: Bool) -> (answer: (UInt32, InterceptOut)?, tellPlugin: Bool) {
        intercepts.withLock { intercepts in
            let pending = intercepts[id]
            intercepts[id] = nil
            if let answer = pending?.answer {
                guard takingAnswer, case .answered(let code, let out) = answer else { return (nil, false) }
                return ((code, out), false)
            }
            rememberEnded(id, status)
            return (nil, pending?.answering != true)
        }
    }

    /// Ends every deferred intercept: the instance is destroyed.
    func endAllIntercepts() {
        let waiters = intercepts.withLock { intercepts in
            defer { intercepts = [:] }
            return intercepts.values.compactMap(\.waiter)
        }
        for waiter in waiters { waiter.resume(returning: .ended(.cancelled, "the interceptor was destroyed")) }
    }
}

import CCallFrame
import CPaging
import FoundationEssentials
import Paging
import Synchronization

/// The handles of one call into a plugin (`paging_config_t *`, `paging_intercept_out_t *`,
/// `paging_keys_out_t *`): valid on the thread running that call, until it returns.
///
/// A handle is not a pointer to anything: it is a token that is never reused (the plugin
/// instance's serial number in the high bits, then the handle's kind, a count of its calls in
/// the low ones). While a call runs, its thread holds a ``CallFrame`` naming the token and the
/// call's result builder; a host function given a handle resolves it through the frame of the
/// calling thread. A handle kept from an earlier call, passed to another thread, or of the
/// wrong kind finds no frame: it is refused and logged, naming the plugin from the token's
/// serial, and never reaches another call's builder - a reused stack address cannot be mistaken
/// for a live call, as it could when the handle was the builder's address.
enum CallHandle {
    enum Kind: UInt8, CustomStringConvertible {
        case config, intercept, keys, transform

        var description: String {
            switch self {
            case .config: "config (create)"
            case .intercept: "out (intercept)"
            case .keys: "keys out (refresh_key/key_chain)"
            case .transform: "page out (transform)"
            }
        }

        /// "a config (create)", "an out (intercept)": the kind after its article.
        var withArticle: String { self == .intercept ? "an \(self)" : "a \(self)" }
    }

    /// What the calling thread is running: the innermost call of the host into a plugin.
    struct CallFrame {
        let token: UInt64
        let kind: Kind
        let builder: UnsafeMutableRawPointer
        let previous: UnsafeMutableRawPointer?
    }

    /// The bits of a token: its instance's serial from bit 40, its kind in bits 38 and 39 (a
    /// refusal names the kind of the handle the plugin kept, not only the kind expected), its
    /// call count below.
    private static let sequenceMask: UInt64 = (1 << 38) - 1
    private static let kindShift: UInt64 = 38

    /// `token` as the handle of a call of `kind`.
    @inline(__always)
    static func handle(_ token: UInt64, _ kind: Kind) -> UInt64 { token & ~(3 << kindShift) | UInt64(kind.rawValue) << kindShift }

    /// Refusals so far, and the last tokens refused: a call whose own handle was refused while
    /// it ran (used from a thread of the plugin's, which the call then joined, or passed where a
    /// handle of another kind was expected) is failed by its builder
    /// (``CallResultBuilder/withHandle(_:_:)``) rather than answered without what the refused
    /// calls would have set.
    private static let refusalCount = Atomic<UInt64>(0)
    private static let refusedTokens = Locked<[(token: UInt64, why: String)]>([])

    /// The count of refusals so far, to compare before and after a call.
    @inline(__always)
    static var refusals: UInt64 { refusalCount.load(ordering: .acquiring) }

    /// Why a use of `token` was refused lately, or nil. Off the hot path.
    static func refusal(of token: UInt64) -> String? { refusedTokens.withLock { $0.last { $0.token == token }?.why } }

    /// A fresh token for a call into `instance`, never given before.
    @inline(__always)
    static func token(for instance: PluginInstance) -> UInt64 {
        UInt64(instance.serial) << 40 | instance.calls.add(1, ordering: .relaxed).newValue & sequenceMask
    }

    /// Runs `body` with the handle `token` (from ``token(for:)``) of `kind`, resolving to
    /// `builder` on this thread until `body` returns.
    @inline(__always)
    static func with<Builder, R>(
        _ kind: Kind, _ token: UInt64, _ builder: UnsafeMutablePointer<Builder>, _ body: (OpaquePointer) -> R
    ) -> R {
        let token = handle(token, kind)
        var frame = CallFrame(token: token, kind: kind, builder: UnsafeMutableRawPointer(builder),
                              previous: paging_call_frame_current())
        return withUnsafeMutablePointer(to: &frame) { frame in
            paging_call_frame_set(frame)
            defer { paging_call_frame_set(frame.pointee.previous) }
            return body(OpaquePointer(bitPattern: UInt(token))!)
        }
    }

    /// The builder behind `handle` when it is a live handle of `kind` on this thread; otherwise
    /// `nil`, after logging the refusal of `function` against the plugin the handle came from.
    /// A handle that is no live call's (kept from an earlier call), used while a call of `kind`
    /// runs on this thread, fails that call too: `failing` records the refusal on its builder.
    /// Answered as if nothing had been set, it had lost what the plugin meant for it (a page
    /// completed empty, a key chain without its next key that ended paging).
    @inline(__always)
    static func resolve<Builder>(_ handle: OpaquePointer?, _ kind: Kind, _ function: String, as: Builder.Type,
                                 failing: (inout Builder, String) -> Void) -> UnsafeMutablePointer<Builder>? {
        let token = UInt64(UInt(bitPattern: handle))
        var next = paging_call_frame_current()
        while let raw = next {
            let frame = raw.assumingMemoryBound(to: CallFrame.self).pointee
            if frame.token == token {
                guard frame.kind == kind else {
                    refuse(token, kind, function, liveHere: true)
                    return nil
                }
                return frame.builder.assumingMemoryBound(to: Builder.self)
            }
            next = frame.previous
        }
        let refusal = refuse(token, kind, function, liveHere: false)
        if let current = paging_call_frame_current()?.assumingMemoryBound(to: CallFrame.self).pointee, current.kind == kind {
            failing(&current.builder.assumingMemoryBound(to: Builder.self).pointee, refusal)
        }
        return nil
    }

    /// The misuse of the call of `token`, a handle of `kind`, when a use of its handle was
    /// refused while it ran (since the count `refusals` was taken): from another thread, or
    /// passed where a handle of another kind was expected.
    static func misuse(of token: UInt64, _ kind: Kind, since refusals: UInt64) -> String? {
        guard self.refusals != refusals, let why = refusal(of: handle(token, kind)) else { return nil }
        return "the call's \(kind) handle was \(why); refused"
    }

    /// Logs the refusal and remembers it, for the call the handle belongs to if it still runs
    /// (`liveHere`: on this thread, where the handle was passed as one of another kind); returns
    /// the line logged.
    @discardableResult
    private static func refuse(_ token: UInt64, _ kind: Kind, _ function: String, liveHere: Bool) -> String {
        let remembered = liveHere ? "passed to \(function), which takes \(kind.withArticle) handle" : "used from another thread while the call ran"
        refusedTokens.withLock { tokens in
            if tokens.count == 64 { tokens.removeFirst() }
            tokens.append((token, remembered))
        }
        refusalCount.add(1, ordering: .releasing)
        let current = paging_call_frame_current().map { $0.assumingMemoryBound(to: CallFrame.self).pointee }
        let issuer = PluginInstance.registered(serial: token >> 40)
        let owner = issuer ?? current.flatMap { PluginInstance.registered(serial: $0.token >> 40) }
        // The kind the token says, when an instance issued it (not a plugin's garbage).
        let given = issuer.flatMap { _ in Kind(rawValue: UInt8(token >> kindShift & 3)) } ?? kind
        let expected = given == kind ? "" : ", where \(kind.withArticle) handle was expected"
        let why: String
        if token == 0 {
            why = "a NULL \(kind) handle"
        } else if let current, current.token >> 40 == token >> 40, current.token != token {
            why = "\(given.withArticle) handle kept from an earlier call, used during a later one\(expected)"
        } else if current?.token == token {
            why = "\(current!.kind.withArticle) handle where \(kind.withArticle) handle was expected"
        } else {
            why = "\(given.withArticle) handle used after its call returned, or from another thread\(expected)"
        }
        let line = "\(function): \(why); refused"
        if let owner { owner.log(.error, line) } else { refuseUnowned(line) }
        return line
    }

    /// The refusals said without a plugin to say them against.
    private static let unownedSaid = Locked<Set<String>>([])

    /// Logs `refusal`, of a call whose arguments do not say which plugin made it (a NULL host
    /// table or handle): against the plugin whose call runs on this thread, else among the
    /// libraries' lines, once for each text (a thread calling in a loop would flood the log).
    /// (Unsaid, a plugin's NULL got PAGING_ERR_INVALID_ARGUMENT and nothing else.)
    static func refuseUnowned(_ refusal: String) {
        if let current = paging_call_frame_current()?.assumingMemoryBound(to: CallFrame.self).pointee,
           let owner = PluginInstance.registered(serial: current.token >> 40) {
            return owner.log(.error, refusal)
        }
        guard unownedSaid.withLock({ $0.count < 64 && $0.insert(refusal).inserted }) else { return }
        PluginLibrary.librarySink(.error, "a plugin", "\(refusal) (which plugin made the call, its arguments do not tell)")
    }
}

extension PluginInstance {
    /// Every instance by serial, for naming the plugin a stale handle came from. Instances are
    /// never freed (see ``PluginInstance``), so the list costs no lifetime it did not have.
    private static let registry = Locked<[PluginInstance]>([])

    /// Serials run from 1 to 2^24 - 1 (24 bits of a handle; 0 is never one), then wrap.
    private static let serialPeriod = 1 << 24 - 1

    /// Registers `instance` and returns its serial.
    static func register(_ instance: PluginInstance) -> UInt32 {
        registry.withLock { list in
            list.append(instance)
            return UInt32((list.count - 1) % serialPeriod + 1)
        }
    }

    /// The newest instance with `serial`.
    static func registered(serial: UInt64) -> PluginInstance? {
        guard serial > 0, serial <= UInt64(serialPeriod) else { return nil }
        return registry.withLock { list in
            var index = Int(serial) - 1
            var found: PluginInstance?
            while index < list.count {
                found = list[index]
                index += serialPeriod
            }
            return found
        }
    }
}

/// A map with a fixed capacity that evicts the least recently used entry, and entries that
/// expire after a time to live. Every operation is O(1): entries live in slots of an array,
/// linked in recency order by index, so nothing is allocated per entry once warm.
///
/// Inlinable, so that the CacheInterceptor's specialized code runs it specialized too.
@usableFromInline
struct LRUCache<Key: Hashable, Value> {
    @usableFromInline
    struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var storedAt: Duration
        @usableFromInline var newer: Int
        @usableFromInline var older: Int

        @inlinable
        init(key: Key, value: Value, storedAt: Duration, newer: Int, older: Int) {
            self.key = key
            self.value = value
            self.storedAt = storedAt
            self.newer = newer
            self.older = older
        }
    }

    @usableFromInline let capacity: Int
    @usableFromInline let timeToLive: Duration
    @usableFromInline var slots: [Entry?] = []
    @usableFromInline var slotOfKey: [Key: Int] = [:]
    @usableFromInline var freeSlots: [Int] = []
    @usableFromInline var newest = -1
    @usableFromInline var oldest = -1

    @inlinable
    init(capacity: Int, timeToLive: Duration) {
        precondition(capacity > 0, "a cache needs a capacity of at least 1, got \(capacity)")
        self.capacity = capacity
        self.timeToLive = timeToLive
    }

    @inlinable
    var count: Int { slotOfKey.count }

    /// The value for `key` unless it has expired (then it is removed); a hit makes it the newest.
    @inlinable
    mutating func value(for key: Key, now: Duration) -> Value? {
        guard let slot = slotOfKey[key], let entry = slots[slot] else { return nil }
        if now - entry.storedAt > timeToLive {
            remove(slot: slot)
            return nil
        }
        moveToNewest(slot)
        return entry.value
    }

    /// The value for `key` and whether it is still fresh, keeping it when it is not (for
    /// policies that serve stale values); a hit makes it the newest.
    @inlinable
    mutating func valueKeepingStale(for key: Key, now: Duration) -> (value: Value, isFresh: Bool)? {
        guard let slot = slotOfKey[key], let entry = slots[slot] else { return nil }
        moveToNewest(slot)
        return (entry.value, now - entry.storedAt <= timeToLive)
    }

    @inlinable
    mutating func insert(_ value: Value, for key: Key, now: Duration) {
        if let slot = slotOfKey[key] {
            slots[slot]!.value = value
            slots[slot]!.storedAt = now
            moveToNewest(slot)
            return
        }
        if slotOfKey.count >= capacity { remove(slot: oldest) }
        let entry = Entry(key: key, value: value, storedAt: now, newer: -1, older: newest)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = entry
        } else {
            slot = slots.count
            slots.append(entry)
        }
        link(asNewest: slot)
        slotOfKey[key] = slot
    }

    @inlinable
    mutating func removeAll() {
        slots = []
        slotOfKey = [:]
        freeSlots = []
        newest = -1
        oldest = -1
    }

    /// Keys from the most to the least recently used.
    var keysByRecency: [Key] {
        var keys: [Key] = []
        var slot = newest
        while slot >= 0, let entry = slots[slot] {
            keys.append(entry.key)
            slot = entry.older
        }
        return keys
    }

    @inlinable
    mutating func remove(slot: Int) {
        guard let entry = slots[slot] else { return }
        unlink(slot)
        slotOfKey[entry.key] = nil
        slots[slot] = nil
        freeSlots.append(slot)
    }

    @inlinable
    mutating func moveToNewest(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        link(asNewest: slot)
    }

    @inlinable
    mutating func link(asNewest slot: Int) {
        slots[slot]!.older = newest
        slots[slot]!.newer = -1
        if newest >= 0 { slots[newest]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    @inlinable
    mutating func unlink(_ slot: Int) {
        let entry = slots[slot]!
        if entry.newer >= 0 { slots[entry.newer]!.older = entry.older } else { newest = entry.older }
        if entry.older >= 0 { slots[entry.older]!.newer = entry.newer } else { oldest = entry.newer }
    }
}

// Implicit for internal types; spelled out since this one is @usableFromInline.
extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
extension LRUCache.Entry: Sendable where Key: Sendable, Value: Sendable {}

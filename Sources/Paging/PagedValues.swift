/// The values a ``PaginationManager`` has loaded, page by page, as one collection.
///
/// It is a persistent balanced tree of pages: adding or dropping a page at either end, or
/// replacing the last one, costs O(log pages) and shares everything else with the
/// previous value, so every published output is a cheap, immutable snapshot. Reading a value
/// by index costs O(log pages); iterating costs O(1) a value.
public struct PagedValues<Key: Hashable & Sendable, Value: Sendable>: RandomAccessCollection, Sendable {
    // Inlinable throughout, so that the tree is specialized for the caller's Key and Value
    // (the PaginationManager's appends and the app's reads run in the caller's module).
    @usableFromInline var root: PageNode<Key, Value>?

    @inlinable
    public init() {}

    @inlinable
    init(root: PageNode<Key, Value>?) {
        self.root = root
    }

    @inlinable
    public var startIndex: Int { 0 }
    @inlinable
    public var endIndex: Int { root?.itemCount ?? 0 }

    @inlinable
    public subscript(position: Int) -> Value {
        precondition(position >= 0 && position < endIndex, "PagedValues index \(position) out of range 0..<\(endIndex)")
        return root!.value(at: position)
    }

    @inlinable
    public func makeIterator() -> Iterator { Iterator(root: root) }

    /// How many pages the values come from.
    @inlinable
    public var pageCount: Int { root?.pageCount ?? 0 }

    /// The pages, first to last.
    public var pages: [Page<Key, Value>] {
        var pages: [Page<Key, Value>] = []
        pages.reserveCapacity(pageCount)
        root?.forEachPage { pages.append($0) }
        return pages
    }

    /// The first page, or `nil` when empty. O(1): every node keeps its subtree's first and last node.
    @inlinable
    public var firstPage: Page<Key, Value>? { root?.firstNode.page }
    /// The last page, or `nil` when empty. O(1).
    @inlinable
    public var lastPage: Page<Key, Value>? { root?.lastNode.page }

    @inlinable
    func appending(_ page: Page<Key, Value>) -> PagedValues { PagedValues(root: PageNode.insertLast(page, into: root)) }
    @inlinable
    func prepending(_ page: Page<Key, Value>) -> PagedValues { PagedValues(root: PageNode.insertFirst(page, into: root)) }

    @inlinable
    func replacingLast(with page: Page<Key, Value>) -> PagedValues {
        guard let root else { return appending(page) }
        return PagedValues(root: root.replacingLast(with: page))
    }

    @inlinable
    func droppingFirst() -> PagedValues { PagedValues(root: root?.removingFirst()) }
    @inlinable
    func droppingLast() -> PagedValues { PagedValues(root: root?.removingLast()) }

    /// Iterates values in order, keeping the path to the current page on a stack.
    public struct Iterator: IteratorProtocol {
        @usableFromInline var stack: [PageNode<Key, Value>] = []
        @usableFromInline var values: [Value] = []
        @usableFromInline var index = 0

        @inlinable
        init(root: PageNode<Key, Value>?) {
            descendLeft(from: root)
        }

        @inlinable
        public mutating func next() -> Value? {
            while index == values.count {
                guard let node = stack.popLast() else { return nil }
                values = node.page.values
                index = 0
                descendLeft(from: node.right)
            }
            defer { index += 1 }
            return values[index]
        }

        @inlinable
        mutating func descendLeft(from node: PageNode<Key, Value>?) {
            var node = node
            while let current = node {
                stack.append(current)
                node = current.left
            }
        }
    }
}

/// A node of an immutable AVL tree of pages, ordered by position, with subtree sizes.
@usableFromInline
final class PageNode<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let page: Page<Key, Value>
    @usableFromInline let left: PageNode?
    @usableFromInline let right: PageNode?
    @usableFromInline let height: Int
    /// Values in this subtree.
    @usableFromInline let itemCount: Int
    /// Pages in this subtree.
    @usableFromInline let pageCount: Int
    /// The leftmost and rightmost nodes below this one (`nil`: this node), so that the first
    /// and last pages are read in O(1), without copying a page per level. Two pointers a node.
    @usableFromInline let leftmost: PageNode?
    @usableFromInline let rightmost: PageNode?

    @inlinable
    init(_ left: PageNode?, _ page: Page<Key, Value>, _ right: PageNode?) {
        self.page = page
        self.left = left
        self.right = right
        height = max(left?.height ?? 0, right?.height ?? 0) + 1
        itemCount = (left?.itemCount ?? 0) + page.values.count + (right?.itemCount ?? 0)
        pageCount = (left?.pageCount ?? 0) + 1 + (right?.pageCount ?? 0)
        leftmost = left.map { $0.leftmost ?? $0 }
        rightmost = right.map { $0.rightmost ?? $0 }
    }

    @inlinable
    var firstNode: PageNode { leftmost ?? self }
    @inlinable
    var lastNode: PageNode { rightmost ?? self }

    @inlinable
    var first: Page<Key, Value> { firstNode.page }
    @inlinable
    var last: Page<Key, Value> { lastNode.page }

    @inlinable
    func value(at position: Int) -> Value {
        var node = self
        var position = position
        while true {
            let leftCount = node.left?.itemCount ?? 0
            if position < leftCount {
                node = node.left!
                continue
            }
            position -= leftCount
            if position < node.page.values.count { return node.page.values[position] }
            position -= node.page.values.count
            node = node.right!
        }
    }

    func forEachPage(_ body: (Page<Key, Value>) -> Void) {
        left?.forEachPage(body)
        body(page)
        right?.forEachPage(body)
    }

    @inlinable
    static func insertLast(_ page: Page<Key, Value>, into node: PageNode?) -> PageNode {
        guard let node else { return PageNode(nil, page, nil) }
        return balance(node.left, node.page, insertLast(page, into: node.right))
    }

    @inlinable
    static func insertFirst(_ page: Page<Key, Value>, into node: PageNode?) -> PageNode {
        guard let node else { return PageNode(nil, page, nil) }
        return balance(insertFirst(page, into: node.left), node.page, node.right)
    }

    @inlinable
    func removingFirst() -> PageNode? {
        guard let left else { return right }
        return Self.balance(left.removingFirst(), page, right)
    }

    @inlinable
    func removingLast() -> PageNode? {
        guard let right else { return left }
        return Self.balance(left, page, right.removingLast())
    }

    /// The shape does not change, so no rebalancing is needed.
    @inlinable
    func replacingLast(with newPage: Page<Key, Value>) -> PageNode {
        guard let right else { return PageNode(left, newPage, nil) }
        return PageNode(left, page, right.replacingLast(with: newPage))
    }

    /// Joins two balanced subtrees around a page when their heights differ by at most two.
    @inlinable
    static func balance(_ left: PageNode?, _ page: Page<Key, Value>, _ right: PageNode?) -> PageNode {
        let leftHeight = left?.height ?? 0
        let rightHeight = right?.height ?? 0
        if leftHeight > rightHeight + 1, let left {
            if (left.left?.height ?? 0) >= (left.right?.height ?? 0) {
                return PageNode(left.left, left.page, PageNode(left.right, page, right))
            }
            let pivot = left.right!
            return PageNode(PageNode(left.left, left.page, pivot.left), pivot.page, PageNode(pivot.right, page, right))
        }
        if rightHeight > leftHeight + 1, let right {
            if (right.right?.height ?? 0) >= (right.left?.height ?? 0) {
                return PageNode(PageNode(left, page, right.left), right.page, right.right)
            }
            let pivot = right.left!
            return PageNode(PageNode(left, page, pivot.left), pivot.page, PageNode(pivot.right, right.page, right.right))
        }
        return PageNode(left, page, right)
    }
}

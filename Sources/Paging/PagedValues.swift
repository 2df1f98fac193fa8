/// The values a ``PaginationManager`` has loaded, page by page, as one collection.
///
/// It is a persistent balanced tree of pages: adding or dropping a page at either end, or
/// replacing the last one, costs O(log pages) and shares everything else with the
/// previous value, so every published output is a cheap, immutable snapshot. Reading a value
/// by index costs O(log pages); iterating costs O(1) a value.
public struct PagedValues<Key: Hashable & Sendable, Value: Sendable>: RandomAccessCollection, Sendable {
    var root: PageNode<Key, Value>?

    public init() {}

    init(root: PageNode<Key, Value>?) {
        self.root = root
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { root?.itemCount ?? 0 }

    public subscript(position: Int) -> Value {
        precondition(position >= 0 && position < endIndex, "PagedValues index \(position) out of range 0..<\(endIndex)")
        return root!.value(at: position)
    }

    public func makeIterator() -> Iterator { Iterator(root: root) }

    /// How many pages the values come from.
    public var pageCount: Int { root?.pageCount ?? 0 }

    /// The pages, first to last.
    public var pages: [Page<Key, Value>] {
        var pages: [Page<Key, Value>] = []
        pages.reserveCapacity(pageCount)
        root?.forEachPage { pages.append($0) }
        return pages
    }

    var firstPage: Page<Key, Value>? { root?.first }
    var lastPage: Page<Key, Value>? { root?.last }

    func appending(_ page: Page<Key, Value>) -> PagedValues { PagedValues(root: PageNode.insertLast(page, into: root)) }
    func prepending(_ page: Page<Key, Value>) -> PagedValues { PagedValues(root: PageNode.insertFirst(page, into: root)) }

    func replacingLast(with page: Page<Key, Value>) -> PagedValues {
        guard let root else { return appending(page) }
        return PagedValues(root: root.replacingLast(with: page))
    }

    func droppingFirst() -> PagedValues { PagedValues(root: root?.removingFirst()) }
    func droppingLast() -> PagedValues { PagedValues(root: root?.removingLast()) }

    /// Iterates values in order, keeping the path to the current page on a stack.
    public struct Iterator: IteratorProtocol {
        private var stack: [PageNode<Key, Value>] = []
        private var values: [Value] = []
        private var index = 0

        init(root: PageNode<Key, Value>?) {
            descendLeft(from: root)
        }

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

        private mutating func descendLeft(from node: PageNode<Key, Value>?) {
            var node = node
            while let current = node {
                stack.append(current)
                node = current.left
            }
        }
    }
}

/// A node of an immutable AVL tree of pages, ordered by position, with subtree sizes.
final class PageNode<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    let page: Page<Key, Value>
    let left: PageNode?
    let right: PageNode?
    let height: Int
    /// Values in this subtree.
    let itemCount: Int
    /// Pages in this subtree.
    let pageCount: Int

    init(_ left: PageNode?, _ page: Page<Key, Value>, _ right: PageNode?) {
        self.page = page
        self.left = left
        self.right = right
        height = max(left?.height ?? 0, right?.height ?? 0) + 1
        itemCount = (left?.itemCount ?? 0) + page.values.count + (right?.itemCount ?? 0)
        pageCount = (left?.pageCount ?? 0) + 1 + (right?.pageCount ?? 0)
    }

    var first: Page<Key, Value> { left?.first ?? page }
    var last: Page<Key, Value> { right?.last ?? page }

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

    static func insertLast(_ page: Page<Key, Value>, into node: PageNode?) -> PageNode {
        guard let node else { return PageNode(nil, page, nil) }
        return balance(node.left, node.page, insertLast(page, into: node.right))
    }

    static func insertFirst(_ page: Page<Key, Value>, into node: PageNode?) -> PageNode {
        guard let node else { return PageNode(nil, page, nil) }
        return balance(insertFirst(page, into: node.left), node.page, node.right)
    }

    func removingFirst() -> PageNode? {
        guard let left else { return right }
        return Self.balance(left.removingFirst(), page, right)
    }

    func removingLast() -> PageNode? {
        guard let right else { return left }
        return Self.balance(left, page, right.removingLast())
    }

    /// The shape does not change, so no rebalancing is needed.
    func replacingLast(with newPage: Page<Key, Value>) -> PageNode {
        guard let right else { return PageNode(left, newPage, nil) }
        return PageNode(left, page, right.replacingLast(with: newPage))
    }

    /// Joins two balanced subtrees around a page when their heights differ by at most two.
    private static func balance(_ left: PageNode?, _ page: Page<Key, Value>, _ right: PageNode?) -> PageNode {
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

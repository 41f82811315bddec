/// Keys joined into groups, each group named by its least key, so that any order of
/// joins names the same groups. Only keys joined to a lesser one are held.
public struct UnionFind<Key: Hashable & Comparable & Sendable>: Sendable {
    public init() {}

    /// Each key's step toward its group's name; a name has none.
    private var parent: [Key: Key] = [:]

    /// The name of `key`'s group, shortening the way there for the next call.
    public mutating func find(_ key: Key) -> Key {
        let root = root(of: key)
        var node = key
        while let next = parent[node], next != root {
            parent[node] = root
            node = next
        }
        return root
    }

    /// The name of `key`'s group, changing nothing.
    public func root(of key: Key) -> Key {
        var root = key
        while let next = parent[root] { root = next }
        return root
    }

    /// Makes `a`'s and `b`'s groups one.
    public mutating func union(_ a: Key, _ b: Key) {
        let (rootA, rootB) = (find(a), find(b))
        guard rootA != rootB else { return }
        if rootA < rootB { parent[rootB] = rootA } else { parent[rootA] = rootB }
    }
}

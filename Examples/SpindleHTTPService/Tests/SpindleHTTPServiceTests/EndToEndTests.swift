import Testing

/// Every suite of this package, run one test at a time: they measure timing-sensitive behaviour (full queues,
/// deadlines, shutdowns) on small machines, where tests running side by side would only blur it.
@Suite(.serialized)
enum EndToEndTests {}

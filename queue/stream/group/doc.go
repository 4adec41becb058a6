// Package group holds the pure building blocks of partitioned streams and
// consumer groups (issue 13, sections 2 and 3): no goroutines, no I/O, no
// broker state; the caller serialises access. The stream queue type
// (package queue/stream) uses them like this:
//
//   - Publishing (partition.go). A partitioned stream keeps a Router from
//     its declare arguments (x-stream-partitions, x-stream-partition-by);
//     each publishing channel keeps a RoundRobin. Router.Route picks the
//     partition of each message: the x-stream-partition header, else the
//     x-stream-partition-key header hashed with MurmurHash3 x86_32 and seed
//     104729 (RabbitMQ's super-stream hash, so every client library
//     agrees), else the routing key hashed the same way, else round robin.
//     A *PartitionError closes the channel with 406.
//
//   - Consuming (args.go). ParseGroupArgs reads x-stream-offset,
//     x-stream-group (or LavinMQ's x-stream-automatic-offset-tracking),
//     x-stream-rebalance-timeout and x-stream-cancel-on-rebalance;
//     ParseInterval is also the x-max-age syntax.
//
//   - Membership (assign.go, rebalance.go). Each (stream, group) has a
//     Rebalancer; the broker numbers members in join order (Member) and
//     calls Join on basic.consume and Leave on cancel, channel or
//     connection close, missed heartbeats or the ack timeout. Assign gives
//     the target owners (balanced, sticky, deterministic). The Rebalancer
//     returns Events: Revoke (stop delivering the partition to the old
//     owner; with cancel-on-rebalance, cancel it), Resume, and Move (the
//     partition's new owner and Generation). Settled after each settlement
//     of a revoked partition, and Tick at NextDeadline (the broker's one
//     timer per group), complete the moves.
//
//   - Offsets (watermark.go). Each (group, partition) has a Watermark,
//     started at the committed offset read from the store (or where the
//     group's x-stream-offset points for a partition never committed, or
//     the first retained offset if the committed one was dropped). The
//     owner's reader delivers NextRedelivery first (redelivered=true), then
//     new offsets from High, stamping each delivery tag with the
//     partition's Generation; acks and nacks pass that generation back, so
//     a former owner's late ack settles its tag without moving the
//     committed offset. On a Move the broker calls Handover. Committed is
//     what the broker persists (coalesced, and at once at revoke, cancel,
//     close, shutdown and tx.commit), and what lag is measured from.
//
//   - Retention (retention.go). Retention.Drop says how many of a
//     partition's oldest segments x-max-length-bytes and x-max-age remove;
//     never the segment being written.
package group

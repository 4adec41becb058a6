// Package amqp converts between bytes and typed AMQP 0-9-1 values: frames,
// method arguments, field tables (RabbitMQ's dialect), content headers and
// properties, and reply codes.
//
// It is a pure codec: no goroutines, sockets, logging or broker state.
// Every length read from the wire is checked against the bytes that remain
// (or against the negotiated frame size) before anything is allocated, and
// decoded strings, byte slices and tables never alias the input buffer.
//
// Method structs, ids and constants are generated from the spec XML in
// spec/ by internal/specgen; run `go generate ./amqp/...` after changing it.
package amqp

//go:generate go run ./internal/specgen -spec spec/amqp0-9-1.stripped.extended.xml -out .

// Package bench compares carve's heap.Shared with what a Go engineer
// would pick instead to keep many values off the GC's sight or in a
// shared cache: github.com/VictoriaMetrics/fastcache, github.com/dgraph-
// io/ristretto/v2 and a sharded Go map of []byte. It is a module of its
// own so that carve's go.mod keeps none of their dependencies; its tests
// and benchmarks are in valuestore_test.go.
package bench

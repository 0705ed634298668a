module github.com/carvelab/carve/bench

go 1.26.0

require (
	github.com/VictoriaMetrics/fastcache v1.13.2
	github.com/carvelab/carve v0.0.0
	github.com/dgraph-io/ristretto/v2 v2.4.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/golang/snappy v1.0.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/carvelab/carve => ../

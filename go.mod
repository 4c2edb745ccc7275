module github.com/geoevent/geoevent

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/golang/geo v0.0.0-20260818125358-b200a1149890
	github.com/google/uuid v1.6.0
	github.com/paulmach/orb v0.14.0
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/zap v1.28.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

package redisstore_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// One Redis serves the replicas' rate limits and their replay store.
func ExampleNewReplays() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	rates, err := redisstore.NewRates(rdb, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	replays, err := redisstore.NewReplays(rdb, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	var key []byte // 32 bytes or more, the same on every replica
	_ = server.Options{
		// Verifier, DB, …
		Limits: server.Limits{Rates: rates},
		Input:  server.InputOptions{Keys: [][]byte{key}, Replays: replays},
	}
}

// On MariaDB or SQLite, replicas share the flow taints on Redis.
func ExampleNewTaints() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	taints, err := redisstore.NewTaints(rdb, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	var policy *flow.Policy // flow.ParsePolicy(…)
	checker, err := flow.New(policy, flow.Options{Store: taints})
	_, _ = checker, err
}

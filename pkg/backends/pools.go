package backends

// PoolReporter is implemented by a backend that hands out addresses from
// pools of its own (bare metal). The router asks it for the pools' usage
// to publish with the backend's status; it must be cheap (no cloud or API
// call) and safe for concurrent use.
type PoolReporter interface {
	// PoolUsage returns each pool's usage per IP family the pool has
	// addresses of, pools in config order, IPv4 before IPv6.
	PoolUsage() []PoolUsage
}

// PoolUsage is the usage of one IP family of one address pool.
type PoolUsage struct {
	// Pool is the pool's name.
	Pool string `json:"pool"`
	// Family is IPv4 or IPv6.
	Family string `json:"family"`
	// Used counts the usable addresses taken (assigned, shown in a
	// Service's status, or requested by a Service).
	Used uint64 `json:"used"`
	// Size counts the usable addresses, saturated at 2^64-1.
	Size uint64 `json:"size"`
}

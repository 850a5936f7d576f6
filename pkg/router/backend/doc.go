// Package backend is one cloud as one configuration of the router holds
// it: a Member is a Backend (a cloudprovider.Interface with its name, type
// and providerID scheme) with its capabilities resolved once, and every
// call the router makes to it goes through Call, which puts the router's
// deadline on it, a logger carrying the backend and operation, and
// records it in the backend's metrics and health. Ask fans one question out
// to several backends at once, at most MaxFanOut at a time.
//
// Lifetime: a Member lives for one configuration (a reload builds new
// ones); its Health is handed on to the Member that replaces it in place,
// so it lives as long as the backend keeps its name. The metrics are the
// process's. Nothing here is kept in the API server, and nothing here
// knows the router: the packages above import this one, never the other
// way round.
package backend

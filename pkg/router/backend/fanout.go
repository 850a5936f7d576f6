package backend

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Ask calls fn on every backend in bs concurrently, at most maxFanOut at a
// time, and hands each answer given without error to collect, one at a
// time and in no particular order. It returns the failed backends' errors
// joined, or nil. Each fn call carries its own deadline (see Call), so one
// slow cloud never holds the others' answers.
func Ask[T any](ctx context.Context, bs []*Member, fn func(context.Context, *Member) (T, error), collect func(*Member, T)) error {
	var (
		mu       sync.Mutex
		failures []error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(MaxFanOut)
	for _, b := range bs {
		g.Go(func() error {
			v, err := fn(gctx, b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err)
			} else if collect != nil {
				collect(b, v)
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(failures...)
}

package pool

// Check exposes the invariant checker to the external tests.
func (p *Pool) Check() error { return p.check() }

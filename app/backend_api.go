package app

import (
	"fmt"
	"strings"
	"time"

	"fano/config"
	"fano/gateway"
	"fano/gateway/api"
	"fano/gateway/breaker"
	"fano/gateway/ratelimit"
)

// The "api" backend type: an OpenAI-compatible chat completions API, paced
// by a per-model rate limiter and guarded by a circuit breaker. The
// limiters of one buildBackends call (env.limiters) are shared: one per
// (base URL, model, key variable), so two backends on the same provider
// model spend the same budget.

func newAPIBackend(name string, b *config.Backend, env *backendEnv) (gateway.Backend, error) {
	o := b.API
	if o == nil {
		return nil, fmt.Errorf("backends.%s.api: missing", name)
	}
	// The variable's NAME is in the config; its value (the key) is never
	// printed, not even in this error.
	key, err := api.KeyFromEnv(name, o.APIKeyEnv)
	if err != nil {
		if o.APIKeyEnv == "" {
			return nil, err
		}
		// An unset key parks this backend (credentials), not fano: the
		// others work, and SIGHUP or `fano backend resume` re-reads it.
		env.Logger.Error().Str("event", "cmd.fano.backend_credentials").Str("backend", name).Str("variable", o.APIKeyEnv).
			Msg(err.Error())
		key = ""
	}
	lim := env.limiters.Get(o.BaseURL+"|"+o.Model+"|"+o.APIKeyEnv,
		ratelimit.Config{Name: o.Model, InitialRPM: o.InitialRPM})
	gw, err := api.New(api.Config{
		Name: name, BaseURL: o.BaseURL, Model: o.Model, APIKey: key, KeyEnv: o.APIKeyEnv,
		Timeout: time.Duration(o.TimeoutSeconds) * time.Second, Stream: o.Stream,
		Limiter: lim, Clock: env.Clock, Logger: env.Logger,
	})
	if err != nil {
		return nil, err
	}
	return wrapBreaker(gw, env), nil
}

// wrapBreaker guards a backend with the circuit breaker configured in
// llm.circuit_breaker, logging its transitions. It is idempotent, so
// buildBackends may wrap every backend, API ones included.
func wrapBreaker(gw gateway.Backend, env *backendEnv) gateway.Backend {
	if _, ok := gw.(*breaker.Backend); ok {
		return gw
	}
	cb := env.Cfg.LLM.CircuitBreaker
	log := env.Logger
	return breaker.Wrap(gw, breaker.Config{
		FailureThreshold: cb.FailureThreshold,
		RecoveryTimeout:  time.Duration(cb.RecoveryTimeoutSeconds) * time.Second,
		HalfOpenRequests: cb.HalfOpenRequests,
		Clock:            env.Clock,
		OnStateChange: func(backend, from, to string) {
			ev := log.Info()
			if to == breaker.Open {
				ev = log.Warn()
			}
			ev.Str("event", "gateway."+backend+".circuit_"+strings.ReplaceAll(to, "-", "_")).
				Str("from", from).Str("to", to).Msg("circuit breaker changed state")
		},
	})
}

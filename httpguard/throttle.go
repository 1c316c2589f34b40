package httpguard

import (
	"strconv"
	"sync"
	"time"
)

// maxClients bounds the client addresses the sign-in throttle tracks.
const maxClients = 10000

// limiter is a token bucket per key: a burst of perMinute attempts, then
// one every minute/perMinute. At most maxKeys keys are tracked; when the
// table is full, keys whose buckets have refilled are forgotten, and a new
// key beyond that shares one overflow bucket, so many addresses cannot
// grow the table or escape the limit.
type limiter struct {
	mu        sync.Mutex
	perMinute int
	every     time.Duration
	maxKeys   int
	buckets   map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// overflowKey is the shared bucket of keys beyond maxKeys.
const overflowKey = "\x00overflow"

func newLimiter(perMinute, maxKeys int) *limiter {
	return &limiter{perMinute: perMinute, every: time.Minute / time.Duration(perMinute), maxKeys: maxKeys, buckets: map[string]*bucket{}}
}

// refill brings b up to now.
func (l *limiter) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(float64(l.perMinute), b.tokens+float64(el)/float64(l.every))
		b.at = now
	}
}

// take spends one attempt of key. If none is left it returns false and how
// long until one is.
func (l *limiter) take(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			for k, old := range l.buckets {
				if l.refill(old, now); old.tokens >= float64(l.perMinute) {
					delete(l.buckets, k)
				}
			}
		}
		if len(l.buckets) >= l.maxKeys {
			key = overflowKey
		}
		if b = l.buckets[key]; b == nil {
			b = &bucket{tokens: float64(l.perMinute), at: now}
			l.buckets[key] = b
		}
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) * float64(l.every)), false
	}
	b.tokens--
	return 0, true
}

// give returns the attempt taken for key (it succeeded, so it does not
// count).
func (l *limiter) give(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.tokens = min(float64(l.perMinute), b.tokens+1)
	} else if b := l.buckets[overflowKey]; b != nil {
		b.tokens = min(float64(l.perMinute), b.tokens+1)
	}
}

// seconds is d rounded up to whole seconds, at least 1, for Retry-After.
func seconds(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	return strconv.Itoa(max(s, 1))
}

package object

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// coldFixture is what FuzzColdDamage damages: cold pods of two dictionaries
// of one codec, and a dictionary of another codec with the same number.
type coldFixture struct {
	json  [][]byte
	cold  []*Object // cold[i] holds json[i]; the even ones of dictionary 1
	dicts []*Dict   // this codec's 1 and 2, the other codec's 1
	log   *damageLog
}

var (
	coldOnce sync.Once
	coldFix  *coldFixture
)

func coldObjects(t testing.TB) *coldFixture {
	coldOnce.Do(func() {
		objs := testFleet(21, 64)
		f := &coldFixture{log: &damageLog{}}
		c := NewCodec(CodecOptions{MaxDictBytes: 8 << 10})
		other := NewCodec(CodecOptions{MaxDictBytes: 8 << 10})
		c.OnDamage(f.log.record)
		other.OnDamage(f.log.record)
		if err := other.Train(samplesOf(t, objs, 5)); err != nil {
			panic(err)
		}
		for round, step := range []int{8, 3} {
			if err := c.Train(samplesOf(t, objs, step)); err != nil {
				panic(err)
			}
			f.dicts = append(f.dicts, c.Current())
			for i := round; i < len(objs); i += 2 {
				o, err := c.Compress(objs[i])
				if err != nil {
					panic(err)
				}
				f.cold = append(f.cold, o)
				f.json = append(f.json, objs[i].data)
			}
		}
		f.dicts = append(f.dicts, other.Current())
		coldFix = f
	})
	return coldFix
}

// Kinds of damage FuzzColdDamage applies.
const (
	damageFlip = iota
	damageTruncate
	damageExtend
	damageOverwrite
	damageDict
	damageRawLen
	damageAll
	damageKinds
)

// damage applies damage of kind to o's stored bytes (a copy of them) and
// fields, at position at, with the bytes of b.
func damage(f *coldFixture, o *Object, kind uint8, at uint32, b []byte) {
	o.data = bytes.Clone(o.data)
	n := uint32(max(len(o.data), 1))
	switch kind % damageKinds {
	case damageFlip:
		if len(b) == 0 {
			b = []byte{1}
		}
		for i, x := range b {
			if len(o.data) > 0 {
				o.data[(at+uint32(i)*7)%n] ^= x
			}
		}
	case damageTruncate:
		o.data = o.data[:at%n]
	case damageExtend:
		o.data = append(o.data, b...)
	case damageOverwrite:
		if len(o.data) > 0 {
			copy(o.data[at%n:], b)
		}
	case damageDict:
		o.dict = f.dicts[int(at)%len(f.dicts)]
	case damageRawLen:
		if len(b) >= 4 {
			o.rawLen = binary.LittleEndian.Uint32(b)
		} else {
			o.rawLen += at
		}
	case damageAll:
		for i, x := range b {
			damage(f, o, x, at+uint32(i), b[i+1:min(len(b), i+4)])
		}
	}
}

// FuzzColdDamage damages a cold object's stored form (its frame's bytes,
// its dictionary, its length) as memory or a bug could: a read returns
// the JSON that was compressed, or an error wrapping ErrDamaged that is
// reported to the codec; never other bytes.
func FuzzColdDamage(f *testing.F) {
	f.Add(uint8(0), uint8(damageFlip), uint32(0), []byte{0x01})        // magic
	f.Add(uint8(1), uint8(damageFlip), uint32(4), []byte{0x04})        // checksum flag
	f.Add(uint8(2), uint8(damageFlip), uint32(5), []byte{0x03})        // dictionary id
	f.Add(uint8(3), uint8(damageFlip), uint32(6), []byte{0x10})        // content size
	f.Add(uint8(4), uint8(damageFlip), uint32(40), []byte{0x80})       // a block
	f.Add(uint8(5), uint8(damageFlip), uint32(1<<31), []byte{0xff, 1}) // near the end
	f.Add(uint8(6), uint8(damageTruncate), uint32(0), []byte(nil))
	f.Add(uint8(7), uint8(damageTruncate), uint32(5), []byte(nil))
	f.Add(uint8(8), uint8(damageTruncate), uint32(1<<32-1), []byte(nil)) // the checksum's last byte
	f.Add(uint8(9), uint8(damageExtend), uint32(0), []byte{0})
	f.Add(uint8(10), uint8(damageExtend), uint32(0), []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}) // an empty skippable frame
	f.Add(uint8(11), uint8(damageExtend), uint32(0), []byte{0x28, 0xb5, 0x2f, 0xfd})             // another frame's magic
	f.Add(uint8(12), uint8(damageOverwrite), uint32(9), []byte("{}"))
	f.Add(uint8(13), uint8(damageDict), uint32(0), []byte(nil))
	f.Add(uint8(14), uint8(damageDict), uint32(1), []byte(nil))
	f.Add(uint8(15), uint8(damageDict), uint32(2), []byte(nil)) // another codec's, same number
	f.Add(uint8(16), uint8(damageRawLen), uint32(1), []byte(nil))
	f.Add(uint8(17), uint8(damageRawLen), uint32(0), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(18), uint8(damageRawLen), uint32(0), []byte{0, 0, 0, 0})
	f.Add(uint8(19), uint8(damageAll), uint32(3), []byte{damageFlip, 2, damageRawLen, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, which, kind uint8, at uint32, b []byte) {
		fx := coldObjects(t)
		i := int(which) % len(fx.cold)
		o := *fx.cold[i]
		damage(fx, &o, kind, at, b)

		got, err := o.Bytes()
		check := func(what string, got []byte, err error) {
			t.Helper()
			if err == nil {
				if !bytes.Equal(got, fx.json[i]) {
					t.Fatalf("%s of a damaged object returned other bytes without an error:\n got %q\nwant %q", what, got, fx.json[i])
				}
				return
			}
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("%s: error %v does not wrap ErrDamaged", what, err)
			}
			if !fx.log.reported(&o) {
				t.Fatalf("%s: error %v not reported to OnDamage", what, err)
			}
		}
		check("Bytes", got, err)
		prefix := []byte("prefix")
		app, err := o.AppendBytes(prefix[:len(prefix):len(prefix)])
		if err != nil {
			if !bytes.Equal(app, prefix) {
				t.Fatalf("AppendBytes changed dst on error: %q", app)
			}
		} else if !bytes.HasPrefix(app, prefix) {
			t.Fatalf("AppendBytes lost dst: %q", app)
		} else {
			app = app[len(prefix):]
		}
		check("AppendBytes", app, err)
		if h, err := o.Hot(); err == nil {
			check("Hot", h.data, nil)
		} else {
			check("Hot", nil, err)
		}
		// The object it was copied from is untouched.
		if got, err := fx.cold[i].Bytes(); err != nil || !bytes.Equal(got, fx.json[i]) {
			t.Fatalf("the undamaged object no longer reads: %v", err)
		}
	})
}

// reported reports whether o was reported damaged, and forgets it.
func (l *damageLog) reported(o *Object) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range l.objs {
		if d == o {
			l.objs = append(l.objs[:i], l.objs[i+1:]...)
			l.errs = append(l.errs[:i], l.errs[i+1:]...)
			return true
		}
	}
	return false
}

// TestDamagedLengthAllocatesLittle: a read of a cold object whose length
// field is damaged to gigabytes fails without allocating them first.
func TestDamagedLengthAllocatesLittle(t *testing.T) {
	fx := coldObjects(t)
	o := *fx.cold[0]
	o.rawLen = 1<<32 - 1
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := o.Bytes()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Bytes with a damaged length: %v, want ErrDamaged", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Bytes with a damaged length allocated %d bytes", n)
	}
	if !fx.log.reported(&o) {
		t.Error("not reported to OnDamage")
	}
}

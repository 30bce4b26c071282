// Package objecttest helps tests of the packages that read cold objects.
package objecttest

import (
	"bytes"
	"reflect"
	"unsafe"

	"github.com/informerd/informerd/internal/object"
)

// Corrupt returns a copy of the cold object o whose stored frame has one
// byte changed, as memory damage would: the package object keeps the
// frame unexported, so it is reached with reflect.
func Corrupt(o *object.Object) *object.Object {
	c := *o
	f := reflect.ValueOf(&c).Elem().FieldByName("data")
	p := (*[]byte)(unsafe.Pointer(f.UnsafeAddr()))
	b := bytes.Clone(*p)
	b[len(b)/2] ^= 0x5a
	*p = b
	return &c
}

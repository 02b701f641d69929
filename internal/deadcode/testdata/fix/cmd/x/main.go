// Command x calls the library.
package main

import "example.com/fix/lib"

func main() {
	lib.Used()
	var i lib.Iface = lib.Impl{}
	i.Do()
}

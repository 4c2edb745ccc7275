package main

// Webhooks: hook.

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
)

func init() {
	register(command{name: "hook", order: 76, args: "put NAME --url URL [--fences A,B] [--types T,T] | get NAME | list | delete NAME", summary: "define, show, list and remove webhooks", run: hook})
}

func hook(e *env, args []string) int {
	fset := e.flags()
	to := fset.String("url", "", "post the notifications to `URL` (http:// or https://)")
	fences := fset.String("fences", "", "only the fences `A,B` (default: every fence)")
	types := fset.String("types", "", "only the types `T,T` of enter, exit, inside (default: every type)")
	return named(e, fset, args, "hook", "/hooks", "", func() (map[string]any, error) {
		if *to == "" {
			return nil, badArg("give the hook's --url")
		}
		body := map[string]any{"url": *to}
		if *fences != "" {
			body["fences"] = strings.Split(*fences, ",")
		}
		if *types != "" {
			body["types"] = strings.Split(*types, ",")
		}
		return body, nil
	})
}

// named runs the subcommands of a named kind of thing (fences, hooks) at
// path, after parsing args with fset: put NAME, its body what body makes
// of the flags, answered with whether it created or replaced one; list,
// get NAME and delete NAME, the API's answers printed as they come.
// query ("form=a", or none) is added to put's, list's and get's
// requests.
func named(e *env, fset *flag.FlagSet, args []string, kind, path, query string, body func() (map[string]any, error)) int {
	pos, code, ok := e.parse(fset, args, 1, 2)
	if !ok {
		return code
	}
	name := ""
	if len(pos) == 2 {
		name = url.PathEscape(pos[1])
	}
	list, one := path+"?limit=1000", path+"/"+name
	if query != "" {
		list, one = list+"&"+query, one+"?"+query
	}
	switch {
	case pos[0] == "list" && len(pos) == 1:
		return e.show("GET", list, nil)
	case pos[0] == "get" && name != "":
		return e.show("GET", one, nil)
	case pos[0] == "delete" && name != "":
		if _, err := e.api.retry("DELETE", path+"/"+name, nil, nil); err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.stdout, "deleted %s %s\n", kind, pos[1])
		return exitOK
	case pos[0] == "put" && len(pos) == 2:
		b, err := body()
		if err != nil {
			return e.fail(err)
		}
		var r struct {
			Created bool `json:"created"`
		}
		if _, err := e.api.retry("PUT", one, b, &r); err != nil {
			return e.fail(err)
		}
		verb := "replaced"
		if r.Created {
			verb = "created"
		}
		fmt.Fprintf(e.stdout, "%s %s %s\n", verb, kind, pos[1])
		return exitOK
	}
	fset.Usage()
	return exitUsage
}

// show makes a request and prints the API's answer as it came.
func (e *env) show(method, path string, body any) int {
	raw, err := e.api.retry(method, path, body, nil)
	if err != nil {
		return e.fail(err)
	}
	printRaw(e.stdout, raw)
	return exitOK
}

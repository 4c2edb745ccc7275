package main

// Webhooks: hook.

import (
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
	pos, code, ok := e.parse(fset, args, 1, 2)
	if !ok {
		return code
	}
	if code, done := named(e, pos, "hook", "/hooks", ""); done {
		return code
	}
	if pos[0] != "put" || len(pos) != 2 {
		fset.Usage()
		return exitUsage
	}
	if *to == "" {
		return e.fail(badArg("give the hook's --url"))
	}
	body := map[string]any{"url": *to}
	if *fences != "" {
		body["fences"] = strings.Split(*fences, ",")
	}
	if *types != "" {
		body["types"] = strings.Split(*types, ",")
	}
	var r struct {
		Created bool `json:"created"`
	}
	if _, err := e.api.retry("PUT", "/hooks/"+url.PathEscape(pos[1]), body, &r); err != nil {
		return e.fail(err)
	}
	verb := "replaced"
	if r.Created {
		verb = "created"
	}
	fmt.Fprintf(e.stdout, "%s hook %s\n", verb, pos[1])
	return exitOK
}

// named runs the list, get and delete subcommands of a named kind of
// thing (fences, hooks) at path, the API's answers printed as they come;
// query is added to list's and get's requests. done is false for the
// other subcommands.
func named(e *env, pos []string, kind, path, query string) (code int, done bool) {
	name := ""
	if len(pos) == 2 {
		name = url.PathEscape(pos[1])
	}
	var raw []byte
	var err error
	switch {
	case pos[0] == "list" && len(pos) == 1:
		raw, err = e.api.retry("GET", path+"?limit=1000"+query, nil, nil)
	case pos[0] == "get" && name != "":
		raw, err = e.api.retry("GET", path+"/"+name+strings.Replace(query, "&", "?", 1), nil, nil)
	case pos[0] == "delete" && name != "":
		if _, err = e.api.retry("DELETE", path+"/"+name, nil, nil); err == nil {
			fmt.Fprintf(e.stdout, "deleted %s %s\n", kind, pos[1])
			return exitOK, true
		}
	default:
		return 0, false
	}
	if err != nil {
		return e.fail(err), true
	}
	printRaw(e.stdout, raw)
	return exitOK, true
}

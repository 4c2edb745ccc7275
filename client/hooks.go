package client

import (
	"context"

	"github.com/geoevent/geoevent/core"
)

// PutHook defines or replaces a webhook (see core.Hook): a new one is
// delivered the notifications made after it; a replaced one keeps its
// position.
func (c *Client) PutHook(ctx context.Context, h *core.Hook) (*core.PutHookReply, error) {
	return Call(ctx, c, core.PutHook, h)
}

// Hook returns a webhook with the position it has been delivered up to;
// 242 HOOK_NOT_FOUND when there is none.
func (c *Client) Hook(ctx context.Context, name string) (*core.Hook, error) {
	return Call(ctx, c, core.GetHook, &core.HookName{Name: name})
}

// Hooks returns a page of webhooks in name order, with the feed's newest
// sequence.
func (c *Client) Hooks(ctx context.Context, req *core.HookListRequest) (*core.HookList, error) {
	return Call(ctx, c, core.ListHooks, req)
}

// DeleteHook removes a webhook; 242 HOOK_NOT_FOUND when there is none.
func (c *Client) DeleteHook(ctx context.Context, name string) (*core.DeleteHookReply, error) {
	return Call(ctx, c, core.DeleteHook, &core.HookName{Name: name})
}

// HookDelivered records that a hook's notifications up to req.Seq were
// acknowledged by its receiver. The leader's deliverer (package io)
// submits it; the position only moves forward, under the hook's current
// version.
func (c *Client) HookDelivered(ctx context.Context, req *core.HookDelivered) (*core.HookDeliveredReply, error) {
	return Call(ctx, c, core.HookDeliveredOp, req)
}

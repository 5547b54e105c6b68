// The guided tour (optional): the chapter's order, each step a view at a prepared state
// (an address: state.js's ?run=&text=&pos=&layer=&head=#view), with previous / next. A
// step may name the stage of view 12 it shows (the gptlab:stage event after its address).
// Keyboard: the panel's buttons take Tab and Enter, Escape closes it, and the step's
// title gets the focus so a screen reader reads where the tour is.

import {$} from "./dom.js";
import {currentState, stateAddress} from "./state.js";

const TEXT = "the cat sat on the m";
const EARLY = "8";  // 's' of "sat" in TEXT: its attention has later tokens to mask
export const STEPS = [
  {title: "Tokens", view: "model", state: {text: TEXT}, stage: "tokens",
    say: "The text becomes tokens, each an id in the run's vocabulary: listed beside the diagram, and in the token menu. The model reads them left to right."},
  {title: "Embedding", view: "calc",
    say: "Each token is looked up as a vector, a row of X. Here five tokens of width d: every later number comes from these rows."},
  {title: "Attention, step by step", view: "calc",
    say: "Press Next ▶ (or →) to walk Q, K, V, the scores q·k / √d_k, the causal mask, the softmax and the weighted sum of values."},
  {title: "Attention in a trained model", view: "model", state: {text: TEXT, pos: EARLY, layer: "0", head: "0"}, stage: "attn-0",
    say: "The same seven stages on a trained model's block 0, for a token with later tokens to mask: Next step ▶ (or →) walks them; from the mask on, the switch shows what would change without it."},
  {title: "Multi-head attention", view: "heads", state: {text: TEXT, layer: "0", head: "all"},
    say: "A real run's heads, each its own pattern on the same text, then concatenated and mixed by W_O."},
  {title: "Positions", view: "positions",
    say: "Attention alone does not see order: sinusoids, learned rows or RoPE's rotations give each position its mark."},
  {title: "The feed-forward network", view: "model", state: {text: TEXT, layer: "0"}, stage: "ffn-0",
    say: "Block 0's FFN: each token alone, expanded, passed through the nonlinearity and projected back. Another block's opens from the diagram (click it, or Tab to the diagram, ↑ ↓ to it, Enter)."},
  {title: "The residual stream", view: "lens", state: {text: TEXT},
    say: "Every sublayer adds to the stream. Read after each block, it turns into the prediction: the logit lens."},
  {title: "The whole stack", view: "allheads", state: {text: TEXT, layer: "0"},
    say: "Every layer and head at once; below, the head view draws each token's lines to what it attends to, one colour per head."},
  {title: "The next token", view: "nexttoken", state: {text: TEXT},
    say: "The last position's logits become probabilities: temperature, top-k and top-p cut them, and a token is drawn."},
];

let step = -1;

// The address of step i: its view and prepared state, on the run the learner has chosen.
export function stepAddress(i) {
  const s = STEPS[i], run = currentState().run;
  return stateAddress({...(run ? {run} : {}), ...(s.state || {})}, s.view);
}

function show(go) {
  const s = STEPS[step], panel = $("tour");
  panel.hidden = false;
  $("tour-title").textContent = `Tour ${step + 1} of ${STEPS.length}: ${s.title}`;
  $("tour-say").textContent = s.say;
  $("tour-prev").disabled = step === 0;
  $("tour-next").disabled = step === STEPS.length - 1;
  go(stepAddress(step));
  if (s.stage) document.dispatchEvent(new CustomEvent("gptlab:stage", {detail: {view: s.view, stage: s.stage}}));
  $("tour-title").focus();
}

export function startTour(go) {
  const move = (by) => { step = Math.max(0, Math.min(STEPS.length - 1, step + by)); show(go); };
  $("tour-start").addEventListener("click", () => { step = 0; show(go); });
  $("tour-prev").addEventListener("click", () => move(-1));
  $("tour-next").addEventListener("click", () => move(1));
  const close = () => { $("tour").hidden = true; step = -1; $("tour-start").focus(); };
  $("tour-close").addEventListener("click", close);
  $("tour").addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  $("tour-title").setAttribute("tabindex", "-1");
}

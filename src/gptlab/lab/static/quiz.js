// View 7: generated questions, checked by the server with a worked answer.

import {api, guarded, showError} from "./api.js";
import {$, htmlEl} from "./dom.js";

const quiz = {q: null, seed: Math.floor(Math.random() * 100000), asked: 0};

const quizNew = guarded(async () => {
  quiz.seed += 1;
  const asked = ++quiz.asked;
  const q = await api("/api/quiz", {kind: $("quiz-kind").value || null, seed: quiz.seed});
  if (asked !== quiz.asked) return;  // a newer question is on its way
  quiz.q = q;
  $("quiz-question").textContent = q.question;
  $("quiz-result").replaceChildren();
  const box = $("quiz-answer");
  box.replaceChildren();
  if (q.format === "choice") {
    q.choices.forEach((c) => {
      const label = htmlEl("label", {class: "choice"});
      const input = htmlEl("input", {type: "radio", name: "quiz-choice", value: c.id, "data-testid": `quiz-choice-${c.id}`});
      label.append(input, " " + c.text);
      box.appendChild(label);
    });
  } else {
    box.appendChild(htmlEl("input", {id: "quiz-input", "data-testid": "quiz-input", size: 40, "aria-label": "your answer",
      placeholder: q.format === "list" ? "e.g. 0.25, 0.75" : "a number"}));
  }
});

// A new check drops the last verdict first: an error (no answer, a bad number) is never
// shown beside the previous question's "Correct.".
const quizCheck = guarded(async () => {
  const q = quiz.q;
  if (!q) return;
  $("quiz-result").replaceChildren();
  const answer = q.format === "choice"
    ? (document.querySelector("input[name=quiz-choice]:checked") || {}).value
    : $("quiz-input").value;
  if (answer === undefined || answer === "") { showError("give an answer first"); return; }
  const r = await api("/api/quiz/check", {kind: q.kind, seed: q.seed, answer});
  const out = $("quiz-result");
  out.replaceChildren(htmlEl("p", {class: r.correct ? "ok" : "no", "data-testid": "quiz-verdict"},
    r.correct ? "Correct." : `Not quite. The answer: ${r.expected_text.replace(/\.?$/, ".")}`),
    htmlEl("p", {}, "Worked answer: " + r.worked));
}, ["quiz-result"]);

export function load() {
  $("quiz-new").addEventListener("click", quizNew);
  $("quiz-kind").addEventListener("change", quizNew);  // a new topic asks a question of it
  // a form, so Enter in the answer field (or on a choice) checks it
  $("quiz-form").addEventListener("submit", (e) => { e.preventDefault(); quizCheck(); });
  quizNew();
}

// What the three users' walks (scenarios/98w-walk-*.mjs) share: at each
// step a person stops at, a screenshot named for the walk and the step,
// and axe-core's judgement of the page as it is (nothing critical or serious).
import { axe } from "./a11y.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";

// stop(page, check, walk, step): the screenshot, then axe's check
export async function stop(page, check, walk, step) {
  await page.screenshot({ path: `${SHOTS}/walk-${walk}-${step}.png`, fullPage: true });
  const bad = await axe(page);
  check(bad.length === 0, `${walk}, ${step}: axe: ${bad.join("; ")}`);
}

// costShown(text) -> the figures a plan's cost gives ("$1.21/h", "$883 a month"), [] when it shows none
export const costShown = (text) => [...text.matchAll(/\$\s?([\d,]+(?:\.\d+)?)/g)].map((m) => Number(m[1].replace(/,/g, "")));

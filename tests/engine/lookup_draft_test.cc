// Prompt-lookup drafts: the n-gram search, the spec parser and the
// controller that decides how many tokens to draft.
#include "engine/lookup_draft.h"

#include <gtest/gtest.h>

namespace pc {
namespace {

using Ids = std::vector<int32_t>;

TEST(FindLookupDraft, TakesWhatFollowedTheLongestMostRecentMatch) {
  const DraftOptions opt{8, 3, 1};
  // "7 8" occurs twice before the end; "5 7 8" only once (the earlier one).
  const Ids t = {5, 7, 8, 1, 2, 3, 9, 7, 8, 4, 6, 5, 7, 8};
  EXPECT_EQ(FindLookupDraft(t, opt, 4), (Ids{1, 2, 3, 9}));
  // Without 3-grams the most recent "7 8" wins.
  EXPECT_EQ(FindLookupDraft(t, DraftOptions{8, 2, 1}, 4), (Ids{4, 6, 5, 7}));
  // The draft stops at the end of the sequence and at max_tokens.
  EXPECT_EQ(FindLookupDraft(t, DraftOptions{8, 1, 1}, 2), (Ids{4, 6}));
  EXPECT_EQ(FindLookupDraft(Ids{3, 4, 3}, opt, 8), (Ids{4, 3}));
}

TEST(FindLookupDraft, NothingWithoutAnEarlierOccurrence) {
  const DraftOptions opt{8, 4, 1};
  EXPECT_TRUE(FindLookupDraft(Ids{1, 2, 3, 4}, opt, 8).empty());
  EXPECT_TRUE(FindLookupDraft(Ids{}, opt, 8).empty());
  EXPECT_TRUE(FindLookupDraft(Ids{1}, opt, 8).empty());
  EXPECT_TRUE(FindLookupDraft(Ids{1, 1}, opt, 0).empty());
  // A 1-gram match is refused when 2-grams are the shortest allowed.
  EXPECT_EQ(FindLookupDraft(Ids{1, 2, 9, 2}, DraftOptions{8, 4, 1}, 8), (Ids{9, 2}));
  EXPECT_TRUE(FindLookupDraft(Ids{1, 2, 9, 2}, DraftOptions{8, 4, 2}, 8).empty());
}

TEST(FindLookupDraft, ARepeatingTailDraftsItsCycle) {
  const Ids t = {9, 1, 2, 3, 1, 2, 3, 1, 2};
  EXPECT_EQ(FindLookupDraft(t, DraftOptions{8, 4, 1}, 5), (Ids{3, 1, 2}));
}

TEST(ParseDraftSpec, AcceptsNoneAndLookupWithALength) {
  EXPECT_EQ(ParseDraftSpec("none")->max_tokens, 0u);
  EXPECT_EQ(ParseDraftSpec("")->max_tokens, 0u);
  EXPECT_EQ(ParseDraftSpec("lookup")->max_tokens, 8u);
  EXPECT_EQ(ParseDraftSpec("lookup:3")->max_tokens, 3u);
  for (const char* bad : {"lookup:0", "lookup:", "lookup:x", "lookup:65", "lookup:3x", "ngram", "draft:4"}) {
    EXPECT_FALSE(ParseDraftSpec(bad).ok()) << bad;
  }
}

TEST(DraftController, DraftsMoreWhenCheapAndAccepted) {
  DraftController c(8);
  const size_t cheap = c.Want(0.05), dear = DraftController(8).Want(0.6);
  EXPECT_GT(cheap, dear);
  EXPECT_GT(dear, 0u);
  for (int i = 0; i < 20; ++i) c.Observe(8, 8);
  EXPECT_EQ(c.Want(0.3), 8u);
  EXPECT_GT(c.acceptance(), 0.95);
  EXPECT_EQ(DraftController(0).Want(0.01), 0u);  // off
}

TEST(DraftController, BacksOffWhenRejectedAndRetriesLater) {
  DraftController c(8);
  for (int i = 0; i < 30; ++i) c.Observe(4, 0);
  EXPECT_LT(c.acceptance(), 0.05);
  // Nothing pays: a pause, then one probe token, then a longer pause.
  size_t skipped = 0;
  while (c.Want(0.3) == 0) ++skipped;
  EXPECT_GE(skipped, 4u);
  c.Observe(1, 0);
  size_t skipped2 = 0;
  while (c.Want(0.3) == 0) ++skipped2;
  EXPECT_GT(skipped2, skipped);
  // Accepted probes bring drafting back.
  for (int i = 0; i < 20; ++i) c.Observe(1, 1);
  EXPECT_GT(c.Want(0.3), 1u);
}

}  // namespace
}  // namespace pc
